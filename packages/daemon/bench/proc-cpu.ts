import { readFileSync } from 'node:fs';

/** CPU seconds (user + system, all threads) of a process, from /proc (Linux; 10 ms ticks); NaN elsewhere. */
export function processCpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return (Number(x[11]) + Number(x[12])) / 100;
  } catch {
    return NaN;
  }
}
