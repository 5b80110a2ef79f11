/**
 * Real separate hosts on one machine: network namespaces joined by a bridge.
 *
 * Layout for a net with N hosts:
 *   namespace `<prefix>-sw`  holds bridge `br0` (the "switch"), so nothing touches the root namespace;
 *   namespace `<prefix>-hI`  holds `eth0` (a veth whose peer `pI` sits on the bridge) with address
 *                            10.250.<net>.<I+1>/24, `lo` up, and — unless multicast is blocked — a
 *                            multicast route (mDNS sends fail with ENETUNREACH without one).
 *
 * Every namespace and process a net creates is removed by `destroy()`, on process exit, and — for
 * nets left behind by a crashed run — by the sweep at the next `createTestNet()` (names carry the
 * creating pid). Needs root and iproute2; use `netnsAvailable()` to skip otherwise.
 */
import { execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';

export interface TestHost {
  /** Namespace name. */
  readonly ns: string;
  /** IPv4 address on the shared bridge. */
  readonly ip: string;
  /** Run a command inside the namespace and return stdout (throws on non-zero exit). */
  exec(command: string, args?: string[]): string;
  /** Start a long-running process inside the namespace; it is killed by `destroy()`. */
  spawn(command: string, args?: string[], options?: SpawnOptions): ChildProcess;
}

export interface TestNet {
  readonly hosts: TestHost[];
  /** Cut one host off the bridge (link down) or reconnect it. */
  setLink(host: number, up: boolean): void;
  /** Kill every process started through the hosts and delete every namespace. Idempotent. */
  destroy(): Promise<void>;
}

export interface TestNetOptions {
  hosts: number;
  /** Allow multicast (mDNS) between hosts. @default true */
  multicast?: boolean;
}

const PREFIX = 'orch';
let counter = 0;
const live = new Set<{ destroy(): Promise<void> }>();

/** A namespace name for this process's next net (the sweep below removes it once the process is gone). */
export function nextNetPrefix(): { prefix: string; index: number } {
  const index = (process.pid * 7 + counter) % 250;
  return { prefix: `${PREFIX}-${process.pid}-${counter++}`, index };
}

/** Destroys `net` when this process exits, if the test did not. */
export function destroyOnExit(net: { destroy(): Promise<void> }): () => void {
  live.add(net);
  return () => live.delete(net);
}

/** Running things inside namespace `ns`; processes spawned are added to `children` (killed by the net's destroy). */
export function namespaceHost(ns: string, address: string, children: Set<ChildProcess>): TestHost {
  return {
    ns,
    ip: address,
    exec(command, args = []) {
      return execFileSync('ip', ['netns', 'exec', ns, command, ...args], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    },
    spawn(command, args = [], spawnOptions = {}) {
      const child = spawn('ip', ['netns', 'exec', ns, command, ...args], spawnOptions);
      children.add(child);
      child.once('exit', () => children.delete(child));
      return child;
    },
  };
}

export function ip(args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Why this process cannot create namespaces, or null when it can (root + iproute2 on Linux). */
export function netnsMissing(): string | null {
  if (process.platform !== 'linux') return `network namespaces need Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'network namespaces need root';
  try {
    ip(['netns', 'list']);
    return null;
  } catch {
    return 'network namespaces need iproute2 (`ip netns list` failed)';
  }
}

/**
 * True when this process can create namespaces. With ORCHARD_REQUIRE_NETNS_TESTS=1 (CI) a machine
 * that cannot is an error, so no namespace suite can skip unnoticed.
 */
export function netnsAvailable(): boolean {
  const missing = netnsMissing();
  if (missing && process.env.ORCHARD_REQUIRE_NETNS_TESTS === '1') throw new Error(`ORCHARD_REQUIRE_NETNS_TESTS=1 but ${missing}`);
  return missing === null;
}

/** The Debian package each tool a namespace test may need comes in (for the error that names it). */
const TOOL_PACKAGES: Record<string, string> = { nft: 'nftables', tc: 'iproute2', curl: 'curl' };

/**
 * True when every tool in `tools` runs here (`nft`, `tc`: what fault tests use to drop or shape
 * traffic). With ORCHARD_REQUIRE_NETNS_TESTS=1 a missing one is an error naming it and its package,
 * as for namespaces themselves.
 */
export function netToolsAvailable(tools: string[]): boolean {
  const missing = tools.filter((tool) => {
    try {
      execFileSync(tool, tool === 'tc' ? ['-V'] : ['--version'], { stdio: 'ignore' });
      return false;
    } catch {
      return true;
    }
  });
  if (missing.length && process.env.ORCHARD_REQUIRE_NETNS_TESTS === '1') {
    throw new Error(`ORCHARD_REQUIRE_NETNS_TESTS=1 but ${missing.map((t) => `${t} (Debian package ${TOOL_PACKAGES[t] ?? t})`).join(' and ')} cannot run`);
  }
  return missing.length === 0;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Delete namespaces left by test runs whose process is gone. */
export function sweepStaleNamespaces(): void {
  const names = ip(['netns', 'list'])
    .split('\n')
    .map((l) => l.split(' ')[0])
    .filter((n) => n.startsWith(`${PREFIX}-`));
  for (const name of names) {
    const pid = Number(name.split('-')[1]);
    if (Number.isInteger(pid) && pid !== process.pid && !pidAlive(pid)) {
      try {
        ip(['netns', 'del', name]);
      } catch {
        /* already gone */
      }
    }
  }
}

export async function createTestNet(options: TestNetOptions): Promise<TestNet> {
  const { hosts: count, multicast = true } = options;
  if (count < 1 || count > 32) throw new Error(`createTestNet: hosts must be 1..32, got ${count}`);
  sweepStaleNamespaces();
  const { prefix, index: netIndex } = nextNetPrefix();
  const sw = `${prefix}-sw`;
  const created: string[] = [];
  const children = new Set<ChildProcess>();

  const destroySync = () => {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    children.clear();
    for (const ns of created.splice(0).reverse()) {
      try {
        ip(['netns', 'del', ns]);
      } catch {
        /* already gone */
      }
    }
  };

  try {
    ip(['netns', 'add', sw]);
    created.push(sw);
    ip(['-n', sw, 'link', 'add', 'br0', 'type', 'bridge']);
    ip(['-n', sw, 'link', 'set', 'br0', 'up']);
    const hosts: TestHost[] = [];
    for (let i = 0; i < count; i++) {
      const ns = `${prefix}-h${i}`;
      ip(['netns', 'add', ns]);
      created.push(ns);
      ip(['link', 'add', 'eth0', 'netns', ns, 'type', 'veth', 'peer', 'name', `p${i}`, 'netns', sw]);
      ip(['-n', sw, 'link', 'set', `p${i}`, 'master', 'br0']);
      if (!multicast) {
        ip(['-n', sw, 'link', 'set', `p${i}`, 'type', 'bridge_slave', 'mcast_flood', 'off']);
      }
      ip(['-n', sw, 'link', 'set', `p${i}`, 'up']);
      const addr = `10.250.${netIndex}.${i + 1}`;
      ip(['-n', ns, 'addr', 'add', `${addr}/24`, 'dev', 'eth0']);
      ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
      ip(['-n', ns, 'link', 'set', 'lo', 'up']);
      if (multicast) ip(['-n', ns, 'route', 'add', '224.0.0.0/4', 'dev', 'eth0']);
      hosts.push(namespaceHost(ns, addr, children));
    }
    let untrack: () => void = () => {};
    const net: TestNet = {
      hosts,
      setLink(host, up) {
        ip(['-n', sw, 'link', 'set', `p${host}`, up ? 'up' : 'down']);
      },
      async destroy() {
        untrack();
        destroySync();
      },
    };
    untrack = destroyOnExit(net);
    return net;
  } catch (err) {
    destroySync();
    throw err;
  }
}

process.once('exit', () => {
  for (const net of live) void net.destroy();
});
