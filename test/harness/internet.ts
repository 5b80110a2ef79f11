/**
 * A small internet of network namespaces: home LANs, each behind its own NAT router, and a public
 * host, all on one "internet" bridge. Nothing touches the root namespace.
 *
 *   `<prefix>-sw`      bridge br0: the internet (11.<n>.0.0/24 — addresses that libp2p counts as
 *                      public, harmless here since the bridge reaches nothing outside these namespaces)
 *   `<prefix>-pub`     the public host, 11.<n>.0.1
 *   `<prefix>-rI`      LAN I's router: wan0 11.<n>.0.(10+I) on the internet, lan0 192.168.<I+1>.1;
 *                      forwards, MASQUERADEs what leaves wan0 and drops unsolicited inbound (nft)
 *   `<prefix>-hI`      LAN I's machine: eth0 192.168.<I+1>.2, default route via its router
 *
 * A LAN machine reaches the public host (its connections leave from the router's address); nothing
 * on the internet can open a connection to a LAN machine. Needs root, iproute2 and nft
 * (`internetAvailable()`); destroyed like the flat nets of netns.ts (and swept the same way).
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { destroyOnExit, ip, namespaceHost, netnsAvailable, nextNetPrefix, sweepStaleNamespaces, type TestHost } from './netns.js';

export interface Lan {
  router: TestHost;
  host: TestHost;
  /** The router's address on the internet: what the public host sees a LAN machine as. */
  publicIp: string;
}

export interface Internet {
  pub: TestHost;
  lans: Lan[];
  destroy(): Promise<void>;
}

/** Root, iproute2 and nft are here. */
export function internetAvailable(): boolean {
  if (!netnsAvailable()) return false;
  try {
    execFileSync('nft', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** The NAT router's rules: masquerade out of wan0; from wan0, only replies to connections the LAN opened. */
const NAT_RULES = `
table ip nat {
  chain postrouting { type nat hook postrouting priority srcnat; oifname "wan0" masquerade; }
}
table ip filter {
  chain forward {
    type filter hook forward priority filter; policy drop;
    ct state established,related accept
    iifname "lan0" oifname "wan0" accept
  }
}
`;

export async function createInternet(o: { lans: number }): Promise<Internet> {
  if (o.lans < 1 || o.lans > 8) throw new Error(`createInternet: lans must be 1..8, got ${o.lans}`);
  sweepStaleNamespaces();
  const { prefix, index } = nextNetPrefix();
  const net = `11.${index}.0`;
  const created: string[] = [];
  const children = new Set<ChildProcess>();
  const destroySync = () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    children.clear();
    for (const ns of created.splice(0).reverse()) {
      try {
        ip(['netns', 'del', ns]);
      } catch {
        /* already gone */
      }
    }
  };
  const namespace = (name: string) => {
    const ns = `${prefix}-${name}`;
    ip(['netns', 'add', ns]);
    created.push(ns);
    ip(['-n', ns, 'link', 'set', 'lo', 'up']);
    return ns;
  };
  /** A veth from `ns` (named `inner`) to the internet bridge. */
  const toInternet = (ns: string, inner: string, port: string, address: string) => {
    ip(['link', 'add', inner, 'netns', ns, 'type', 'veth', 'peer', 'name', port, 'netns', sw]);
    ip(['-n', sw, 'link', 'set', port, 'master', 'br0']);
    ip(['-n', sw, 'link', 'set', port, 'up']);
    ip(['-n', ns, 'addr', 'add', `${address}/24`, 'dev', inner]);
    ip(['-n', ns, 'link', 'set', inner, 'up']);
  };
  const sw = namespace('sw');
  try {
    ip(['-n', sw, 'link', 'add', 'br0', 'type', 'bridge']);
    ip(['-n', sw, 'link', 'set', 'br0', 'up']);
    const pubNs = namespace('pub');
    toInternet(pubNs, 'eth0', 'ppub', `${net}.1`);
    const lans: Lan[] = [];
    for (let i = 0; i < o.lans; i++) {
      const r = namespace(`r${i}`);
      const h = namespace(`h${i}`);
      const wan = `${net}.${10 + i}`;
      toInternet(r, 'wan0', `pr${i}`, wan);
      ip(['link', 'add', 'lan0', 'netns', r, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', h]);
      ip(['-n', r, 'addr', 'add', `192.168.${i + 1}.1/24`, 'dev', 'lan0']);
      ip(['-n', r, 'link', 'set', 'lan0', 'up']);
      ip(['-n', h, 'addr', 'add', `192.168.${i + 1}.2/24`, 'dev', 'eth0']);
      ip(['-n', h, 'link', 'set', 'eth0', 'up']);
      ip(['-n', h, 'route', 'add', 'default', 'via', `192.168.${i + 1}.1`]);
      execFileSync('ip', ['netns', 'exec', r, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
      execFileSync('ip', ['netns', 'exec', r, 'nft', '-f', '-'], { input: NAT_RULES });
      lans.push({ router: namespaceHost(r, wan, children), host: namespaceHost(h, `192.168.${i + 1}.2`, children), publicIp: wan });
    }
    let untrack: () => void = () => {};
    const internet: Internet = {
      pub: namespaceHost(pubNs, `${net}.1`, children),
      lans,
      async destroy() {
        untrack();
        destroySync();
      },
    };
    untrack = destroyOnExit(internet);
    return internet;
  } catch (err) {
    destroySync();
    throw err;
  }
}
