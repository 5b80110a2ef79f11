/** `sysctl key1 key2 ...` prints `key: value` lines. */
export function parseSysctl(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([\w.]+)\s*[:=]\s*(.*)$/.exec(line.trim());
    if (m) out[m[1]] = m[2].trim();
  }
  return out;
}

export interface SysctlFacts {
  memoryBytes: number | null;
  cores: number | null;
  performanceCores: number | null;
  efficiencyCores: number | null;
  chip: string | null;
  osVersion: string | null;
}

function int(v: string | undefined): number | null {
  if (v === undefined || !/^\d+$/.test(v)) return null;
  return Number(v);
}

export function sysctlFacts(values: Record<string, string>): SysctlFacts {
  return {
    memoryBytes: int(values['hw.memsize']),
    cores: int(values['hw.ncpu']),
    performanceCores: int(values['hw.perflevel0.physicalcpu']),
    efficiencyCores: int(values['hw.perflevel1.physicalcpu']),
    chip: values['machdep.cpu.brand_string'] || null,
    osVersion: values['kern.osproductversion'] || null,
  };
}
