/**
 * `orchard doctor`: one small check per thing that commonly stops a pod from forming or from using
 * RDMA. Every check takes recorded command output (through `DoctorEnv`) and returns a verdict plus
 * the exact fix, so each one is tested on outputs written from Apple's and Linux's documented formats.
 */
import { parseIbvDevinfo, parseRdmaCtlStatus } from '../profile/rdma.js';

export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skip';

export interface CheckResult {
  id: string;
  title: string;
  status: CheckStatus;
  detail: string;
  /** What to do about a warn/fail, as a command or a setting. */
  fix?: string;
}

export interface CommandOutput {
  /** 127 when the command does not exist. */
  code: number;
  stdout: string;
  stderr: string;
}

export interface DoctorEnv {
  platform: NodeJS.Platform;
  nodeVersion: string;
  dataDir: string;
  apiHost: string;
  apiPort: number;
  run(command: string, args: string[]): Promise<CommandOutput>;
  /** True when host:port can be bound now. */
  portFree(host: string, port: number): Promise<boolean>;
  /** True when an Orchard daemon answers on the API port. */
  orchardAnswers(host: string, port: number): Promise<boolean>;
  diskFreeBytes(path: string): Promise<number>;
  /** Model directories in the store (ORG/NAME), or an error message when the store is unusable. */
  models(): Promise<string[] | { error: string }>;
  bundledModelPresent(): Promise<boolean>;
  /** The GPU adapter `--backend auto` would use (software ones flagged), or null with the reason. */
  gpuAdapter?(): Promise<{ adapter: { name: string; software: boolean } | null; reason: string }>;
}

const GiB = 1024 ** 3;

export function checkNode(env: Pick<DoctorEnv, 'nodeVersion'>): CheckResult {
  const [major, minor] = env.nodeVersion.replace(/^v/, '').split('.').map(Number);
  const ok = major > 20 || (major === 20 && minor >= 11);
  return {
    id: 'node',
    title: 'Node.js version',
    status: ok ? 'ok' : 'fail',
    detail: `Node ${env.nodeVersion}${ok ? '' : ' is too old (Orchard needs 20.11 or newer)'}`,
    fix: ok ? undefined : 'install Node.js 20 LTS or newer (https://nodejs.org or `brew install node@20`)',
  };
}

export async function checkApiPort(env: DoctorEnv): Promise<CheckResult> {
  const base = { id: 'api-port', title: `API port ${env.apiHost}:${env.apiPort}` };
  if (await env.portFree(env.apiHost, env.apiPort)) return { ...base, status: 'ok', detail: 'free' };
  if (await env.orchardAnswers(env.apiHost, env.apiPort)) {
    return { ...base, status: 'ok', detail: 'in use by a running Orchard daemon' };
  }
  return {
    ...base,
    status: 'fail',
    detail: 'in use by another program',
    fix: `stop that program or start Orchard with \`--api-port <free port>\` (find it with \`lsof -i :${env.apiPort}\`)`,
  };
}

/** Linux: `ip route get 224.0.0.251`; macOS: `route -n get 224.0.0.251`. */
export function parseMulticastRoute(platform: NodeJS.Platform, out: CommandOutput): { routable: boolean; iface?: string } {
  if (out.code !== 0) return { routable: false };
  if (platform === 'darwin') {
    const iface = /interface:\s*(\S+)/.exec(out.stdout)?.[1];
    return { routable: !!iface, iface };
  }
  const iface = /\bdev\s+(\S+)/.exec(out.stdout)?.[1];
  return { routable: !!iface && iface !== 'lo', iface };
}

export async function checkMulticast(env: DoctorEnv): Promise<CheckResult> {
  const base = { id: 'multicast', title: 'Multicast (mDNS discovery)' };
  const out =
    env.platform === 'darwin'
      ? await env.run('route', ['-n', 'get', '224.0.0.251'])
      : await env.run('ip', ['route', 'get', '224.0.0.251']);
  if (out.code === 127) return { ...base, status: 'skip', detail: 'no route tool to ask' };
  const r = parseMulticastRoute(env.platform, out);
  if (r.routable) return { ...base, status: 'ok', detail: `mDNS goes out on ${r.iface}` };
  return {
    ...base,
    status: 'warn',
    detail: 'no route for multicast: peers on the LAN will not be found automatically',
    fix:
      env.platform === 'darwin'
        ? 'connect to a network, or start with `--bootstrap <multiaddr of a peer>` where multicast is blocked'
        : 'add a multicast route (`sudo ip route add 224.0.0.0/4 dev <interface>`), or start with `--bootstrap <multiaddr of a peer>`',
  };
}

/** macOS `ifconfig bridge0`: is the Thunderbolt Bridge up with Thunderbolt ports as members? */
export function parseBridge(out: CommandOutput): { exists: boolean; up: boolean; members: string[] } {
  if (out.code !== 0) return { exists: false, up: false, members: [] };
  const flags = /^bridge0: flags=[0-9a-f]+<([^>]*)>/m.exec(out.stdout)?.[1]?.split(',') ?? [];
  const members = [...out.stdout.matchAll(/^\s*member:\s*(\S+)/gm)].map((m) => m[1]);
  return { exists: true, up: flags.includes('UP'), members };
}

export async function checkThunderboltBridge(env: DoctorEnv): Promise<CheckResult> {
  const base = { id: 'thunderbolt-bridge', title: 'Thunderbolt Bridge' };
  if (env.platform !== 'darwin') return { ...base, status: 'skip', detail: 'macOS only' };
  const b = parseBridge(await env.run('ifconfig', ['bridge0']));
  if (!b.exists || !b.up || b.members.length === 0) return { ...base, status: 'ok', detail: 'off' };
  return {
    ...base,
    status: 'warn',
    detail: `on, bridging ${b.members.join(', ')}: with Macs cabled in a loop, frames circulate and links stall`,
    fix: 'turn it off: `sudo networksetup -setnetworkserviceenabled "Thunderbolt Bridge" off` (or System Settings > Network > Thunderbolt Bridge > Make Inactive)',
  };
}

export async function checkRdma(env: DoctorEnv): Promise<CheckResult[]> {
  const enabledOut = await env.run('rdma_ctl', ['status']);
  const results: CheckResult[] = [];
  if (env.platform === 'darwin') {
    if (enabledOut.code === 127) {
      results.push({
        id: 'rdma-enabled',
        title: 'RDMA over Thunderbolt',
        status: 'skip',
        detail: 'rdma_ctl not found: RDMA over Thunderbolt needs macOS 26.2 or newer; Orchard uses TCP',
      });
      return results;
    }
    const enabled = parseRdmaCtlStatus(enabledOut.stdout);
    results.push({
      id: 'rdma-enabled',
      title: 'RDMA over Thunderbolt',
      status: enabled ? 'ok' : 'warn',
      detail: enabled ? 'enabled' : 'disabled: links between Macs use TCP (~300 us per message instead of < 50 us)',
      fix: enabled ? undefined : 'restart into Recovery (hold the power button), open Terminal, run `rdma_ctl enable`, restart',
    });
    if (!enabled) return results;
  }
  const info = await env.run('ibv_devinfo', ['-v']);
  if (info.code === 127 || (info.code !== 0 && /no (ib|rdma) devices|No IB devices/i.test(`${info.stdout}${info.stderr}`))) {
    results.push({ id: 'rdma-ports', title: 'RDMA ports', status: 'skip', detail: 'no RDMA devices on this machine' });
    return results;
  }
  const devices = parseIbvDevinfo(info.stdout);
  if (devices.length === 0) {
    results.push({ id: 'rdma-ports', title: 'RDMA ports', status: 'skip', detail: 'no RDMA devices on this machine' });
    return results;
  }
  const inactive = devices.filter((d) => !d.active);
  results.push({
    id: 'rdma-ports',
    title: 'RDMA ports',
    status: inactive.length === 0 ? 'ok' : 'warn',
    detail: devices.map((d) => `${d.name}: ${d.portState ?? 'unknown'}`).join(', '),
    fix: inactive.length
      ? `${inactive.map((d) => d.name).join(', ')} not active: the Mac at the other end of that cable must have RDMA enabled too, and the cable must be Thunderbolt 5`
      : undefined,
  });
  const active = devices.filter((d) => d.active);
  const missing: string[] = [];
  for (const d of active) {
    if (!d.interface) continue;
    const ifc = await env.run('ifconfig', [d.interface]);
    const hasIpv4 = /^\s*inet\s+\d+\.\d+\.\d+\.\d+/m.test(ifc.stdout);
    if (!hasIpv4 || !d.ipv4Gid) missing.push(d.interface);
  }
  if (active.length) {
    results.push({
      id: 'rdma-ipv4',
      title: 'IPv4 on RDMA interfaces',
      status: missing.length ? 'fail' : 'ok',
      detail: missing.length
        ? `${missing.join(', ')} has no IPv4 address, so no IPv4-mapped GID: queue pairs cannot connect`
        : 'every active RDMA port has an IPv4 address and GID',
      fix: missing.length
        ? `give ${missing.join(', ')} an IPv4 address (System Settings > Network > the Thunderbolt port > Details > TCP/IP > Configure IPv4: Manually, e.g. 10.0.N.1/24 per cable)`
        : undefined,
    });
  }
  return results;
}

export async function checkDisk(env: DoctorEnv): Promise<CheckResult> {
  const free = await env.diskFreeBytes(env.dataDir);
  const base = { id: 'disk', title: `Disk space for ${env.dataDir}` };
  const text = `${(free / GiB).toFixed(1)} GiB free`;
  if (free >= 50 * GiB) return { ...base, status: 'ok', detail: text };
  return {
    ...base,
    status: free >= 5 * GiB ? 'warn' : 'fail',
    detail: `${text}: large models need tens to hundreds of GiB`,
    fix: 'free space, or start with `--data-dir` on a larger disk',
  };
}

export async function checkModelStore(env: DoctorEnv): Promise<CheckResult> {
  const base = { id: 'models', title: 'Model store' };
  const models = await env.models();
  const bundled = await env.bundledModelPresent();
  if (!Array.isArray(models)) {
    return { ...base, status: 'fail', detail: models.error, fix: `make ${env.dataDir}/models writable, or start with \`--data-dir\`` };
  }
  const parts = [`${models.length} model(s) in the store`, bundled ? 'bundled demo model present' : 'bundled demo model missing'];
  return {
    ...base,
    status: bundled ? 'ok' : 'warn',
    detail: parts.join('; '),
    fix: bundled ? undefined : 'reinstall Orchard (the repository ships models/orchard-demo)',
  };
}

/** Whether runners can compute on a GPU (WebGPU: Metal on macOS, Vulkan on Linux). Never a failure: the CPU works. */
export async function checkGpu(env: DoctorEnv): Promise<CheckResult> {
  const base = { id: 'gpu', title: 'GPU for the runners (WebGPU)' };
  if (!env.gpuAdapter) return { ...base, status: 'skip', detail: 'not probed' };
  const { adapter, reason } = await env.gpuAdapter();
  if (adapter && !adapter.software) return { ...base, status: 'ok', detail: `${adapter.name}: \`--backend auto\` (the default) runs on it` };
  const fix =
    env.platform === 'linux'
      ? "install the GPU's Vulkan driver (NVIDIA driver, or Mesa's mesa-vulkan-drivers for AMD/Intel); without one runners use the CPU"
      : undefined;
  return { ...base, status: 'warn', detail: `${reason}; runners use the CPU (wasm backend)`, ...(fix ? { fix } : {}) };
}

export async function runDoctor(env: DoctorEnv): Promise<CheckResult[]> {
  return [
    checkNode(env),
    await checkApiPort(env),
    await checkMulticast(env),
    await checkThunderboltBridge(env),
    ...(await checkRdma(env)),
    await checkDisk(env),
    await checkModelStore(env),
    await checkGpu(env),
  ];
}
