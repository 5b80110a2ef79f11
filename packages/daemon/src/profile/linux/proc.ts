/** Pure parsers for the Linux /proc files the profile reads. */

/** /proc/meminfo values are in kB. */
export function parseMeminfo(text: string): { totalBytes: number | null; availableBytes: number | null } {
  const get = (key: string) => {
    const m = new RegExp(`^${key}:\\s+(\\d+)\\s*kB`, 'm').exec(text);
    return m ? Number(m[1]) * 1024 : null;
  };
  return { totalBytes: get('MemTotal'), availableBytes: get('MemAvailable') ?? get('MemFree') };
}

/** CPU model and logical core count from /proc/cpuinfo. */
export function parseCpuinfo(text: string): { model: string | null; cores: number } {
  const blocks = text.split(/\n\s*\n/).filter((b) => /^processor\s*:/m.test(b));
  const model = /^(?:model name|Hardware|cpu model)\s*:\s*(.+)$/m.exec(text)?.[1]?.trim() ?? null;
  return { model, cores: blocks.length };
}
