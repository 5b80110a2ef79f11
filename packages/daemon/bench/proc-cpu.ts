import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU seconds (user + system, all threads) of a process, from /proc (Linux); NaN elsewhere. The sum of
 * its threads' scheduler run times (schedstat, nanoseconds) where the kernel keeps them: /proc/PID/stat
 * counts 10 ms ticks, and a sample of a few hundred tokens of the demo model is ~100 ms of CPU (the
 * per-token lines moved by a tick's 25 us between runs). Threads must live across both readings (a
 * runner's do: its kernel workers and Node's own); else, or without schedstat, the ticks.
 */
export function processCpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    let ns = 0;
    for (const t of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
    if (Number.isFinite(ns) && ns > 0) return ns / 1e9;
  } catch {
    // no schedstat (or a thread ended while read): the ticks below
  }
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return (Number(x[11]) + Number(x[12])) / 100;
  } catch {
    return NaN;
  }
}
