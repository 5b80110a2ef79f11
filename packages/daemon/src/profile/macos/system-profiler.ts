/** Pure parsers for `system_profiler <type> -json`. Each takes the command's stdout. */
import type { ThunderboltPort } from '../types.js';

type Json = Record<string, unknown>;

function section(text: string, key: string): Json[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error(`system_profiler ${key}: output is not JSON`);
  }
  const list = (doc as Json)?.[key];
  if (!Array.isArray(list)) throw new Error(`system_profiler ${key}: missing "${key}" array`);
  return list.filter((e): e is Json => typeof e === 'object' && e !== null);
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** "512 GB" / "36 GB" / "1 TB" -> bytes. */
export function parseMemorySize(text: string): number | null {
  const m = /^([\d.]+)\s*(KB|MB|GB|TB)$/i.exec(text.trim());
  if (!m) return null;
  const scale = { KB: 2 ** 10, MB: 2 ** 20, GB: 2 ** 30, TB: 2 ** 40 }[m[2].toUpperCase() as 'KB'];
  return Math.round(Number(m[1]) * scale);
}

export interface HardwareFacts {
  chip: string | null;
  model: string | null;
  memoryBytes: number | null;
  cores: number | null;
  performanceCores: number | null;
  efficiencyCores: number | null;
}

export function parseHardware(text: string): HardwareFacts {
  const hw = section(text, 'SPHardwareDataType')[0] ?? {};
  // "proc 32:24:8" = total : performance : efficiency
  const procs = /proc\s+(\d+):(\d+):(\d+)/.exec(str(hw.number_processors) ?? '');
  return {
    chip: str(hw.chip_type) ?? str(hw.cpu_type) ?? null,
    model: str(hw.machine_name) ?? null,
    memoryBytes: parseMemorySize(str(hw.physical_memory) ?? ''),
    cores: procs ? Number(procs[1]) : null,
    performanceCores: procs ? Number(procs[2]) : null,
    efficiencyCores: procs ? Number(procs[3]) : null,
  };
}

/** GPU core count of the first GPU that reports one (Apple silicon has exactly one). */
export function parseDisplays(text: string): { gpu: string | null; gpuCores: number | null } {
  for (const gpu of section(text, 'SPDisplaysDataType')) {
    const cores = str(gpu.sppci_cores) ?? str(gpu.cores);
    if (cores && /^\d+$/.test(cores)) {
      return { gpu: str(gpu.sppci_model) ?? str(gpu._name) ?? null, gpuCores: Number(cores) };
    }
  }
  return { gpu: null, gpuCores: null };
}

/** One entry per Thunderbolt bus (= receptacle) with the Macs cabled to it. */
export function parseThunderbolt(text: string): ThunderboltPort[] {
  const ports: ThunderboltPort[] = [];
  for (const bus of section(text, 'SPThunderboltDataType')) {
    const domainUuid = str(bus.domain_uuid_key);
    if (!domainUuid) continue;
    const receptacle = Object.entries(bus).find(([k]) => /^receptacle_\d+_tag$/.test(k))?.[1] as Json | undefined;
    const speed = /(\d+)\s*Gb\/s/.exec(str(receptacle?.current_speed_key) ?? '');
    const items = Array.isArray(bus._items) ? (bus._items as Json[]) : [];
    const remotes = items.filter((i) => typeof i === 'object' && i !== null && str(i.domain_uuid_key));
    ports.push({
      bus: str(bus._name) ?? 'unknown',
      domainUuid,
      speedGbps: speed ? Number(speed[1]) : null,
      receptacle: /^\d+$/.test(str(receptacle?.receptacle_id_key) ?? '') ? Number(receptacle!.receptacle_id_key) : null,
      interface: null,
      connected: str(receptacle?.receptacle_status_key) === 'receptacle_connected' || remotes.length > 0,
      remoteDomainUuids: remotes.map((i) => str(i.domain_uuid_key)!),
      remoteNames: remotes.map((i) => str(i.device_name_key) ?? str(i._name) ?? ''),
    });
  }
  return ports;
}
