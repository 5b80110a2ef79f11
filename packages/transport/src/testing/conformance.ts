/**
 * The Group conformance suite: one set of behavioural tests every backend must pass (TCP, the
 * simulated fabric, RDMA). Call it from a vitest file with a factory that builds `size` connected
 * groups (index = rank), all in this process:
 *
 *   runGroupConformance('tcp', (size) => createLocalTcpGroups(size));
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Group } from '../group.js';
import { floatToHalf, halfToFloat } from '../collectives/reduce.js';
import { ALLREDUCE_DIRECT_MAX_SEND_BYTES, PIPELINE_CHUNK_BYTES } from '../collectives/tuning.js';

export type GroupFactory = (size: number) => Promise<Group[]>;

export interface ConformanceOptions {
  /** Rank counts to test. @default [1, 2, 3, 4] */
  sizes?: number[];
  /** Bytes of the large all-reduce case (run for 2 and 3 ranks). @default 64 MiB */
  largeBytes?: number;
  /** The direct/ring threshold the backend was built with (bytes one rank sends). @default ALLREDUCE_DIRECT_MAX_SEND_BYTES */
  thresholdBytes?: number;
}

/** Deterministic PRNG so every failure reproduces. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Small integers: sums of up to 4 ranks are exact in f32 and f16, so results compare exactly. */
function intData(rank: number, n: number, seed: number): Float32Array {
  const r = rng(seed * 31 + rank);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(r() * 200) - 100;
  return out;
}

function randomData(rank: number, n: number, seed: number): Float32Array {
  const r = rng(seed * 17 + rank + 1000);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (r() - 0.5) * 10 ** Math.floor(r() * 6 - 3);
  return out;
}

function toHalf(xs: Float32Array): Uint16Array {
  const out = new Uint16Array(xs.length);
  for (let i = 0; i < xs.length; i++) out[i] = floatToHalf(xs[i]);
  return out;
}

function bytesEqual(a: ArrayBufferView, b: ArrayBufferView): boolean {
  return Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0;
}

function firstMismatch(a: ArrayLike<number>, b: ArrayLike<number>): string {
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return `index ${i}: ${a[i]} vs ${b[i]}`;
  return a.length === b.length ? 'none' : `lengths ${a.length} vs ${b.length}`;
}

export function runGroupConformance(name: string, factory: GroupFactory, options: ConformanceOptions = {}): void {
  const sizes = options.sizes ?? [1, 2, 3, 4];
  const largeBytes = options.largeBytes ?? 64 * 1024 * 1024;
  const threshold = options.thresholdBytes ?? ALLREDUCE_DIRECT_MAX_SEND_BYTES;
  const multiChunk = Math.floor((3 * PIPELINE_CHUNK_BYTES) / 4) + 5;
  /** Largest element count that still uses direct at this size (for elements of `es` bytes). */
  const edge = (size: number, es: number) => Math.floor(threshold / (Math.max(3, size) - 1) / es);

  describe(`Group conformance: ${name}`, () => {
    let open: Group[] = [];
    const make = async (size: number) => {
      const gs = await factory(size);
      open.push(...gs);
      expect(gs.map((g) => [g.rank, g.size])).toEqual(gs.map((_, i) => [i, size]));
      return gs;
    };
    afterEach(async () => {
      await Promise.all(open.map((g) => g.close()));
      open = [];
    });

    for (const size of sizes) {
      const below = edge(size, 4) - 3;
      const above = edge(size, 4) + 13;
      const lengths = [0, 1, 7, 1023, below, above, multiChunk];
      it(`all-reduce f32 sum/max/min equals the reference on every rank (${size} ranks, ${lengths.join('/')} elements)`, async () => {
        const gs = await make(size);
        let seed = 1;
        for (const n of lengths) {
          for (const op of ['sum', 'max', 'min'] as const) {
            seed++;
            const inputs = gs.map((g) => intData(g.rank, n, seed));
            const bufs = inputs.map((x) => x.slice());
            await Promise.all(gs.map((g, r) => g.allReduce(bufs[r], op)));
            const ref = new Float32Array(n);
            for (let i = 0; i < n; i++) {
              let acc = inputs[0][i];
              for (let r = 1; r < size; r++) acc = op === 'sum' ? acc + inputs[r][i] : op === 'max' ? Math.max(acc, inputs[r][i]) : Math.min(acc, inputs[r][i]);
              ref[i] = acc;
            }
            for (let r = 0; r < size; r++) {
              expect(bytesEqual(bufs[r], ref), `rank ${r}, n=${n}, op=${op}: ${firstMismatch(bufs[r], ref)}`).toBe(true);
            }
          }
        }
      });

      it(`all-reduce of random f32 is bit-identical on every rank and close to the f64 sum (${size} ranks)`, async () => {
        const gs = await make(size);
        for (const n of [below, above, multiChunk]) {
          const inputs = gs.map((g) => randomData(g.rank, n, n));
          const bufs = inputs.map((x) => x.slice());
          await Promise.all(gs.map((g, r) => g.allReduce(bufs[r])));
          for (let r = 1; r < size; r++) expect(bytesEqual(bufs[r], bufs[0]), `rank ${r} differs from rank 0 at n=${n}`).toBe(true);
          for (let i = 0; i < n; i++) {
            let exact = 0;
            let mag = 0;
            for (let r = 0; r < size; r++) {
              exact += inputs[r][i];
              mag += Math.abs(inputs[r][i]);
            }
            if (Math.abs(bufs[0][i] - exact) > mag * 1e-6 + 1e-30) {
              throw new Error(`n=${n} index ${i}: got ${bufs[0][i]}, reference ${exact}`);
            }
          }
        }
      });

      it(`all-reduce f16 (Uint16Array) is exact on integers and identical on every rank (${size} ranks)`, async () => {
        const gs = await make(size);
        for (const n of [1, 7, edge(size, 2) - 1, edge(size, 2) + 1, multiChunk]) {
          const ints = gs.map((g) => toHalf(intData(g.rank, n, n + 5)));
          const bufs = ints.map((x) => x.slice());
          await Promise.all(gs.map((g, r) => g.allReduce(bufs[r], 'sum')));
          for (let i = 0; i < n; i++) {
            let s = 0;
            for (let r = 0; r < size; r++) s += halfToFloat(ints[r][i]);
            if (bufs[0][i] !== floatToHalf(s)) throw new Error(`f16 n=${n} index ${i}: got ${halfToFloat(bufs[0][i])}, want ${s}`);
          }
          const rnd = gs.map((g) => toHalf(randomData(g.rank, n, n + 9)));
          await Promise.all(gs.map((g, r) => g.allReduce(rnd[r])));
          for (let r = 0; r < size; r++) {
            expect(bytesEqual(bufs[r], bufs[0])).toBe(true);
            expect(bytesEqual(rnd[r], rnd[0]), `random f16 differs on rank ${r} at n=${n}`).toBe(true);
          }
        }
      });

      it(`all-gather concatenates in rank order (${size} ranks)`, async () => {
        const gs = await make(size);
        for (const n of [0, 1, 13, 100_003]) {
          const inputs = gs.map((g) => Uint8Array.from({ length: n }, (_, i) => (i * 7 + g.rank * 13) & 255));
          const outs = gs.map(() => new Uint8Array(n * size).fill(0xee));
          await Promise.all(gs.map((g, r) => g.allGather(inputs[r], outs[r])));
          const want = new Uint8Array(n * size);
          inputs.forEach((x, r) => want.set(x, r * n));
          for (let r = 0; r < size; r++) expect(bytesEqual(outs[r], want), `rank ${r}, n=${n}`).toBe(true);
        }
      });

      it(`barrier releases no rank before the last one arrives (${size} ranks)`, async () => {
        const gs = await make(size);
        const arrivedAt: number[] = [];
        const passedAt: number[] = [];
        await Promise.all(
          gs.map(async (g, r) => {
            await new Promise((res) => setTimeout(res, r === size - 1 ? 150 : 0));
            arrivedAt[r] = performance.now();
            await g.barrier();
            passedAt[r] = performance.now();
          }),
        );
        const last = Math.max(...arrivedAt);
        for (const t of passedAt) expect(t).toBeGreaterThanOrEqual(last);
      });
    }

    it('many small all-reduces in a row stay in step', async () => {
      const gs = await make(Math.min(3, Math.max(...sizes)));
      for (let k = 0; k < 50; k++) {
        const bufs = gs.map((g) => Float32Array.of(g.rank + k, 1));
        await Promise.all(gs.map((g, r) => g.allReduce(bufs[r])));
        const want = gs.reduce((s, g) => s + g.rank + k, 0);
        for (const b of bufs) expect([...b]).toEqual([want, gs.length]);
      }
    });

    it('collectives issued back to back without awaiting complete in order', async () => {
      const gs = await make(Math.min(3, Math.max(...sizes)));
      const bufs = gs.map((g) => Array.from({ length: 5 }, (_, k) => Float32Array.of(g.rank * 10 + k)));
      await Promise.all(gs.flatMap((g, r) => bufs[r].map((b) => g.allReduce(b))));
      const sum = (k: number) => gs.reduce((s, g) => s + g.rank * 10 + k, 0);
      for (const per of bufs) expect(per.map((b) => b[0])).toEqual([0, 1, 2, 3, 4].map(sum));
    });

    if (Math.max(...sizes) >= 2) {
      it('send/recv deliver in order, any size, receive posted before or after the send', async () => {
        const [a, b] = await make(2);
        const msgs = [0, 1, 5, 70_000, 1 << 20].map((n, k) => Uint8Array.from({ length: n }, (_, i) => (i + k) & 255));
        const sends = Promise.all(msgs.map((m) => a.send(1, m)));
        const got = msgs.map((m) => new Uint8Array(m.length));
        for (const g of got) await b.recv(0, g);
        await sends;
        got.forEach((g, k) => expect(bytesEqual(g, msgs[k])).toBe(true));
        // And the other direction, with the receive posted first.
        const back = new Float32Array(3);
        const pending = a.recv(1, back);
        await b.send(0, Float32Array.of(1.5, -2, 3));
        await pending;
        expect([...back]).toEqual([1.5, -2, 3]);
      });

      it('rejects bad arguments with errors naming the values', async () => {
        const [a] = await make(2);
        await expect(a.send(0, new Uint8Array(1))).rejects.toThrow(/peer must be a rank in 0\.\.1 other than this rank \(0\), got 0/);
        await expect(a.recv(7, new Uint8Array(1))).rejects.toThrow(/got 7/);
        await expect(a.allGather(new Uint8Array(3), new Uint8Array(5))).rejects.toThrow(/expected 3 x 2 = 6/);
        await expect(a.allReduce(new Int32Array(2) as unknown as Float32Array)).rejects.toThrow(/Float32Array or a Uint16Array/);
      });

      it('a receive from a silent peer rejects within its timeout, naming the peer', async () => {
        const [a] = await make(2);
        const t0 = performance.now();
        const err = await a.recv(1, new Uint8Array(4), { timeoutMs: 200 }).catch((e) => e);
        const ms = performance.now() - t0;
        expect(err?.message).toMatch(/rank 1/);
        expect(ms).toBeGreaterThanOrEqual(150);
        expect(ms).toBeLessThan(3000);
      });

      it('timeoutMs: Infinity waits for a late message, and still fails at once when the peer closes', async () => {
        const [a, b] = await make(2);
        const got = new Uint8Array(2);
        const late = a.recv(1, got, { timeoutMs: Infinity });
        await new Promise((r) => setTimeout(r, 50));
        await b.send(0, Uint8Array.of(4, 2));
        await late;
        expect([...got]).toEqual([4, 2]);
        const waiting = a.recv(1, got, { timeoutMs: Infinity }).catch((e) => e);
        await b.close();
        const err = await waiting;
        expect(err?.message).toMatch(/rank 1/);
      });

      it('an abort signal rejects a pending receive with its reason', async () => {
        const [a] = await make(2);
        const ac = new AbortController();
        const p = a.recv(1, new Uint8Array(4), { signal: ac.signal });
        const reason = new Error('caller gave up');
        ac.abort(reason);
        await expect(p).rejects.toBe(reason);
      });

      it('close rejects pending operations and later calls', async () => {
        const [a] = await make(2);
        const p = a.recv(1, new Uint8Array(4), { timeoutMs: 10_000 });
        await a.close();
        await expect(p).rejects.toThrow();
        await expect(a.allReduce(new Float32Array(1))).rejects.toThrow(/closed/);
        await a.close();
      });
    }

    for (const size of [2, 3].filter((s) => sizes.includes(s))) {
      it(`all-reduce of ${largeBytes >> 20} MiB f32 is correct and identical (${size} ranks)`, async () => {
        const gs = await make(size);
        const n = largeBytes / 4 + (size === 3 ? 1 : 0); // not divisible by the rank count
        const bufs = gs.map((g) => {
          const b = new Float32Array(n);
          for (let i = 0; i < n; i++) b[i] = ((i * (g.rank + 3)) % 1001) - 500;
          return b;
        });
        await Promise.all(gs.map((g, r) => g.allReduce(bufs[r])));
        for (let i = 0; i < n; i += 4099) {
          let want = 0;
          for (let r = 0; r < size; r++) want += ((i * (r + 3)) % 1001) - 500;
          if (bufs[0][i] !== want) throw new Error(`index ${i}: got ${bufs[0][i]}, want ${want}`);
        }
        const last = n - 1;
        let wantLast = 0;
        for (let r = 0; r < size; r++) wantLast += ((last * (r + 3)) % 1001) - 500;
        expect(bufs[0][last]).toBe(wantLast);
        for (let r = 1; r < size; r++) expect(bytesEqual(bufs[r], bufs[0]), `rank ${r} differs`).toBe(true);
      });
    }
  });
}
