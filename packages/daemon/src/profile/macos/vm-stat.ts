/**
 * `vm_stat`: page counts. os.freemem() on macOS counts only free pages, which badly understates what
 * a model can use; like psutil we take free + inactive (free already includes speculative pages).
 */
export function parseVmStat(text: string): { pageSize: number; availableBytes: number } | null {
  const pageSize = Number(/page size of (\d+) bytes/.exec(text)?.[1]);
  const pages = (label: string) => {
    const m = new RegExp(`^Pages ${label}:\\s+(\\d+)\\.?\\s*$`, 'm').exec(text);
    return m ? Number(m[1]) : null;
  };
  const free = pages('free');
  const inactive = pages('inactive');
  if (!pageSize || free === null || inactive === null) return null;
  return { pageSize, availableBytes: (free + inactive) * pageSize };
}
