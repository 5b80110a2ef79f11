/**
 * Test scaffolding for the RDMA transport on the simulated fabric: an in-memory control plane, a stand-in
 * for the TCP fallback link, and a full mesh of simulated hosts (one cable, i.e. one rdma_enX, per peer).
 */
import type { OpOptions, ReduceOp } from '../../src/group.js';
import { createRdmaGroup, type ControlChannel, type LinkChoice, type MeshGroup, type PeerLink } from '../../src/rdma/index.js';
import { SimFabric, type SimDeviceSpec, type SimFabricOptions } from '../../src/rdma/sim-fabric.js';
import type { Verbs } from '../../src/rdma/verbs.js';

/** Control plane between ranks of one process: each round is one message each way. */
export function memoryControl(): (rank: number) => ControlChannel {
  const boxes = new Map<string, { value?: unknown; has: boolean; waiter?: (v: unknown) => void }>();
  const box = (key: string) => {
    let b = boxes.get(key);
    if (!b) boxes.set(key, (b = { has: false }));
    return b;
  };
  return (rank) => ({
    exchange(peer, round, value) {
      const out = box(`${rank}->${peer}:${round}`);
      if (out.waiter) out.waiter(value);
      else {
        out.value = value;
        out.has = true;
      }
      const inb = box(`${peer}->${rank}:${round}`);
      if (inb.has) return Promise.resolve(inb.value);
      return new Promise((resolve) => (inb.waiter = resolve));
    },
  });
}

/** Stand-in for a TCP link: ordered in-memory messages, exact-size receives, timeouts. */
class MemoryLinkEnd implements PeerLink {
  readonly transport = 'fallback' as const;
  other!: MemoryLinkEnd;
  private readonly inbox: Uint8Array[] = [];
  private readonly waiters: Array<{ into: Uint8Array; resolve: () => void; reject: (e: Error) => void; timer: NodeJS.Timeout }> = [];
  closed = false;
  constructor(private readonly name: string) {}

  async send(bytes: Uint8Array): Promise<void> {
    if (this.closed) throw new Error(`${this.name}: closed`);
    this.other.deliver(bytes.slice());
  }
  private deliver(msg: Uint8Array): void {
    const w = this.waiters.shift();
    if (!w) {
      this.inbox.push(msg);
      return;
    }
    clearTimeout(w.timer);
    if (msg.length !== w.into.length) w.reject(new Error(`${this.name}: got ${msg.length} bytes, expected ${w.into.length}`));
    else {
      w.into.set(msg);
      w.resolve();
    }
  }
  recv(into: Uint8Array, options?: OpOptions): Promise<void> {
    if (this.closed) return Promise.reject(new Error(`${this.name}: closed`));
    const msg = this.inbox.shift();
    if (msg) {
      if (msg.length !== into.length) return Promise.reject(new Error(`${this.name}: got ${msg.length} bytes, expected ${into.length}`));
      into.set(msg);
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${this.name}: timed out`)), options?.timeoutMs ?? 5000);
      this.waiters.push({ into, resolve, reject, timer });
    });
  }
  async close(): Promise<void> {
    this.closed = true;
    for (const w of this.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new Error(`${this.name}: closed`));
    }
  }
}

/** Fallback factory shared by all ranks of one process: the two ends of a pair meet here. */
export function memoryFallbacks(): { forRank: (rank: number) => (peer: number, reason: string) => Promise<PeerLink>; reasons: Map<string, string> } {
  const ends = new Map<string, MemoryLinkEnd>();
  const reasons = new Map<string, string>();
  return {
    reasons,
    forRank: (rank) => async (peer, reason) => {
      reasons.set(`${rank}-${peer}`, reason);
      const key = `${Math.min(rank, peer)}-${Math.max(rank, peer)}`;
      let pair = ends.get(key);
      if (!pair) {
        const a = new MemoryLinkEnd(`fallback ${key}`);
        const b = new MemoryLinkEnd(`fallback ${key}`);
        a.other = b;
        b.other = a;
        ends.set(key, a);
        ends.set(`${key}:b`, b);
        pair = a;
        return a;
      }
      return ends.get(`${key}:b`)!;
    },
  };
}

export function deviceName(peer: number): string {
  return `rdma_en${peer + 1}`;
}

export interface SimMeshOptions extends SimFabricOptions {
  size: number;
  sizeClasses?: readonly number[];
  depth?: number;
  timeoutMs?: number;
  smallAllReduceBytes?: number;
  /** Adjust a host's device specs (e.g. drop the IPv4 address of one cable). */
  devices?: (rank: number, peer: number, spec: SimDeviceSpec) => SimDeviceSpec;
  /** Runs after the hosts exist and before links are set up (inject RTR failures here). */
  beforeConnect?: (fabric: SimFabric) => void;
  /** Replace a rank's verbs (null: addon not built). */
  verbsFor?: (rank: number, verbs: Verbs) => Verbs | null;
  /** Fallback links (default: in-memory stand-ins). */
  fallbackFor?: (rank: number) => (peer: number, reason: string) => Promise<PeerLink>;
  /** One device per host serving every peer (default: one cable, one device, per peer). */
  singleDevice?: boolean;
  topology?: 'mesh' | 'ring';
}

export interface SimMesh {
  fabric: SimFabric;
  groups: MeshGroup[];
  choices: LinkChoice[][];
  close(): Promise<void>;
}

export async function simMesh(o: SimMeshOptions): Promise<SimMesh> {
  const fabric = new SimFabric(o);
  const control = memoryControl();
  const fallbacks = memoryFallbacks();
  const verbs: (Verbs | null)[] = [];
  for (let r = 0; r < o.size; r++) {
    const specs: SimDeviceSpec[] = [];
    if (o.singleDevice) specs.push({ name: 'rdma_en1', ipv4: `10.${r}.0.1` });
    else
      for (let p = 0; p < o.size; p++) {
        if (p === r) continue;
        const spec: SimDeviceSpec = { name: deviceName(p), ipv4: `10.${r}.${p}.1` };
        specs.push(o.devices ? o.devices(r, p, spec) : spec);
      }
    const v = fabric.addHost(`host${r}`, specs);
    verbs.push(o.verbsFor ? o.verbsFor(r, v) : v);
  }
  o.beforeConnect?.(fabric);
  const made = await Promise.all(
    verbs.map((v, rank) =>
      createRdmaGroup({
        rank,
        size: o.size,
        verbs: v,
        deviceFor: (peer) => (o.singleDevice ? 'rdma_en1' : deviceName(peer)),
        control: control(rank),
        fallback: o.fallbackFor ? o.fallbackFor(rank) : fallbacks.forRank(rank),
        timeoutMs: o.timeoutMs ?? 3000,
        depth: o.depth ?? 2,
        sizeClasses: o.sizeClasses ?? [4096, 16_384, 65_536],
        smallAllReduceBytes: o.smallAllReduceBytes,
        topology: o.topology,
      }),
    ),
  );
  return {
    fabric,
    groups: made.map((m) => m.group),
    choices: made.map((m) => m.choices),
    close: async () => {
      await Promise.all(made.map((m) => m.group.close()));
      await fabric.close();
    },
  };
}

/** Deterministic pseudo-random floats per rank (exact in f16 when `half`). */
export function rankData(rank: number, n: number, seed = 1): Float32Array {
  const out = new Float32Array(n);
  let x = (rank + 1) * 2654435761 + seed * 40503;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out[i] = ((x >>> 8) / (1 << 24)) * 8 - 4;
  }
  return out;
}

/** What every rank must end with: contributions folded in rank order in f32 arithmetic. */
export function referenceReduce(inputs: Float32Array[], op: ReduceOp): Float32Array {
  const acc = new Float32Array(inputs[0]!);
  for (let r = 1; r < inputs.length; r++) {
    const s = inputs[r]!;
    for (let i = 0; i < acc.length; i++) acc[i] = op === 'sum' ? acc[i]! + s[i]! : op === 'max' ? Math.max(acc[i]!, s[i]!) : Math.min(acc[i]!, s[i]!);
  }
  return acc;
}

/** Rejects if `p` has not settled within `ms`: turns a hang into a test failure. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(t)),
    new Promise<T>((_, reject) => {
      t = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms (hang)`)), ms);
    }),
  ]);
}
