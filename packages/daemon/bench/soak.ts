/**
 * `pnpm bench:soak [--minutes 2] [--concurrency 4] [--sample-seconds 10] [--request-timeout-seconds 60] [--seed 1]`:
 * one daemon (`orchard start` on loopback, its own data dir) serving the bundled model (orchard-demo)
 * takes a seeded mix of requests for the given minutes through its OpenAI, Anthropic and Ollama routes:
 * plain and streamed answers, clients that vanish after the first streamed bytes, and malformed bodies
 * (soak-traffic.ts). Every --sample-seconds it prints the error rate so far and the daemon's and its
 * runners' resident memory and open file descriptors (/proc/PID/status, /proc/PID/fd); it ends with a
 * summary line and exits 1 when any request ended unexpectedly (a 5xx, a hang past the request
 * deadline, a broken stream, a malformed body not answered 4xx) or the daemon stopped answering.
 * Linux only (it reads /proc).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startLoopbackDaemon, waitFor } from '../../../test/harness/daemons.js';
import { formatSample, formatSummary, ppidFromStat, rssFromStatus, seeded, summarize, unexpected, type Outcome, type Sample } from './soak-stats.js';
import { oneRequest } from './soak-traffic.js';

const MODEL = 'orchard-demo';

function positive(name: string, text: string): number {
  const v = Number(text);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`bench:soak: --${name} must be a positive number, got '${text}'`);
  return v;
}

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '2' },
    concurrency: { type: 'string', default: '4' },
    'sample-seconds': { type: 'string', default: '10' },
    'request-timeout-seconds': { type: 'string', default: '60' },
    seed: { type: 'string', default: '1' },
  },
});
const minutes = positive('minutes', values.minutes!);
const concurrency = Math.round(positive('concurrency', values.concurrency!));
const sampleMs = positive('sample-seconds', values['sample-seconds']!) * 1000;
const requestTimeoutMs = positive('request-timeout-seconds', values['request-timeout-seconds']!) * 1000;
const seed = Math.round(positive('seed', values.seed!));
if (process.platform !== 'linux') throw new Error(`bench:soak reads /proc for memory and descriptors: Linux only (this is ${process.platform})`);

/** Children of `pid` (the daemon's runner processes), from /proc/PID/stat. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (ppidFromStat(readFileSync(`/proc/${name}/stat`, 'utf8')) === pid) out.push(Number(name));
    } catch {
      /* exited meanwhile */
    }
  }
  return out;
}

function readProc(pid: number): { rss: number; fds: number } {
  try {
    return { rss: rssFromStatus(readFileSync(`/proc/${pid}/status`, 'utf8')), fds: readdirSync(`/proc/${pid}/fd`).length };
  } catch {
    return { rss: 0, fds: 0 };
  }
}

const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-bench-soak-'));
const daemon = await startLoopbackDaemon(dataDir, { args: ['--name', 'soak'], env: { ORCHARD_LOG_LEVEL: 'warn' } });
const pid = daemon.child.pid!;
const outcomes: Outcome[] = [];
const samples: Sample[] = [];
let exitCode = 0;
try {
  await waitFor('the node with its profile', async () => ((await (await fetch(`${daemon.base}/api/cluster`)).json()) as { nodes: unknown[] }).nodes.length === 1 || undefined, 60_000, 200);
  // The first request places the model (runners start, weights load): not part of the soak.
  const warm = await fetch(`${daemon.base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, prompt: 'In the beginning', max_tokens: 4 }), signal: AbortSignal.timeout(120_000) });
  if (!warm.ok) throw new Error(`bench:soak: the warm-up request got HTTP ${warm.status}: ${await warm.text()}`);
  console.log(`bench:soak — ${MODEL} on one daemon (pid ${pid}), ${minutes} min, ${concurrency} clients at once, seed ${seed}; ${os.cpus().length} cores, load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);

  const t0 = Date.now();
  const endAt = t0 + minutes * 60_000;
  const sample = () => {
    const d = readProc(pid);
    const runners = childrenOf(pid).map(readProc);
    const s: Sample = {
      t: (Date.now() - t0) / 1000,
      requests: outcomes.length,
      errors: outcomes.filter((o) => unexpected(o)).length,
      daemonRssBytes: d.rss,
      runnerRssBytes: runners.reduce((a, r) => a + r.rss, 0),
      runners: runners.length,
      daemonFds: d.fds,
      runnerFds: runners.reduce((a, r) => a + r.fds, 0),
    };
    samples.push(s);
    console.log(formatSample(s));
  };
  sample();
  const timer = setInterval(sample, sampleMs);
  const rand = seeded(seed);
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < endAt) outcomes.push(await oneRequest({ base: daemon.base, model: MODEL, requestTimeoutMs }, rand));
    }),
  );
  clearInterval(timer);
  // Streams cut by vanished clients are torn down asynchronously: let them settle before the last reading.
  await new Promise((r) => setTimeout(r, 1000));
  sample();
  const alive = await fetch(`${daemon.base}/healthz`, { signal: AbortSignal.timeout(5000) }).then((r) => r.ok).catch(() => false);
  const summary = summarize(outcomes, samples);
  console.log(formatSummary(summary, (Date.now() - t0) / 1000));
  for (const [why, n] of summary.firstErrors) console.log(`  unexpected: ${why} (x${n})`);
  console.log(`load average at the end: ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  if (!alive) console.log('bench:soak: the daemon no longer answers /healthz');
  exitCode = summary.errors > 0 || !alive ? 1 : 0;
} catch (err) {
  console.error((err as Error).message);
  exitCode = 1;
} finally {
  // The runners are listed first: once the daemon is gone they are no longer its children.
  const runners = childrenOf(pid);
  daemon.child.kill('SIGKILL');
  for (const c of runners) {
    try {
      process.kill(c, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  rmSync(dataDir, { recursive: true, force: true });
}
process.exit(exitCode);
