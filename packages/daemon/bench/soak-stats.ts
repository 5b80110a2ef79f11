/**
 * The pure half of `pnpm bench:soak` (soak.ts): how each request's outcome is judged, the samples
 * taken over time, and the summary. No I/O here, so the rules are tested on their own
 * (test/bench/soak-stats.test.ts).
 */
import { Prng } from '@orchard/engine/testing';

/** What a soak request is meant to do, and so which answers count as correct. */
export type RequestKind = 'ok' | 'ok-stream' | 'vanish' | 'malformed';

/** How one request ended. */
export interface Outcome {
  kind: RequestKind;
  route: string;
  /** HTTP status, or 0 when no answer came (connection error, timeout). */
  status: number;
  /** True when the request hit its own deadline (a hang). */
  timedOut?: boolean;
  /** A stream that ended without its dialect's end marker, or with an error event in it. */
  brokenStream?: string;
  /** Transport error text when no status came. */
  error?: string;
  ms: number;
}

/**
 * Null when the outcome is what the request asked for; otherwise why it is an unexpected error.
 * Malformed bodies must get a 4xx (a 5xx means the daemon failed on bad input); a client that
 * vanishes mid-stream aborts on purpose, so only a 5xx or a hang before it left counts against it.
 */
export function unexpected(o: Outcome): string | null {
  if (o.timedOut) return `${o.route}: no answer within the request deadline (hang)`;
  if (o.status >= 500) return `${o.route}: HTTP ${o.status}`;
  if (o.kind === 'malformed') return o.status >= 400 && o.status < 500 ? null : `${o.route}: malformed body answered ${o.status || o.error}`;
  if (o.kind === 'vanish') return o.status === 0 || o.status === 200 ? null : `${o.route}: HTTP ${o.status}`;
  if (o.status === 0) return `${o.route}: ${o.error ?? 'no answer'}`;
  if (o.status !== 200) return `${o.route}: HTTP ${o.status}`;
  if (o.brokenStream) return `${o.route}: ${o.brokenStream}`;
  return null;
}

/** One reading of the daemon and its runners. */
export interface Sample {
  /** Seconds since the soak began. */
  t: number;
  requests: number;
  errors: number;
  daemonRssBytes: number;
  /** Summed over the daemon's runner processes (0 when none runs). */
  runnerRssBytes: number;
  runners: number;
  daemonFds: number;
  runnerFds: number;
}

export interface Summary {
  requests: number;
  byKind: Record<RequestKind, number>;
  errors: number;
  errorRate: number;
  /** The first few distinct unexpected errors, with counts. */
  firstErrors: [string, number][];
  meanMs: number;
  p99Ms: number;
  /** Daemon RSS and descriptors at the first and last sample, and their peaks. */
  daemonRss: { first: number; last: number; max: number };
  daemonFds: { first: number; last: number; max: number };
  runnerRss: { first: number; last: number; max: number };
  runnerFds: { first: number; last: number; max: number };
}

/** The q-quantile (0..1) of `xs` by nearest rank; 0 for none. */
export function quantile(xs: number[], q: number): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}

function span(samples: Sample[], pick: (s: Sample) => number) {
  if (samples.length === 0) return { first: 0, last: 0, max: 0 };
  return { first: pick(samples[0]), last: pick(samples[samples.length - 1]), max: Math.max(...samples.map(pick)) };
}

export function summarize(outcomes: Outcome[], samples: Sample[]): Summary {
  const byKind: Record<RequestKind, number> = { ok: 0, 'ok-stream': 0, vanish: 0, malformed: 0 };
  const errs = new Map<string, number>();
  for (const o of outcomes) {
    byKind[o.kind]++;
    const why = unexpected(o);
    if (why) errs.set(why, (errs.get(why) ?? 0) + 1);
  }
  const errors = [...errs.values()].reduce((a, b) => a + b, 0);
  const served = outcomes.filter((o) => o.kind === 'ok' || o.kind === 'ok-stream').map((o) => o.ms);
  return {
    requests: outcomes.length,
    byKind,
    errors,
    errorRate: outcomes.length ? errors / outcomes.length : 0,
    firstErrors: [...errs.entries()].slice(0, 5),
    meanMs: served.length ? served.reduce((a, b) => a + b, 0) / served.length : 0,
    p99Ms: quantile(served, 0.99),
    daemonRss: span(samples, (s) => s.daemonRssBytes),
    daemonFds: span(samples, (s) => s.daemonFds),
    runnerRss: span(samples, (s) => s.runnerRssBytes),
    runnerFds: span(samples, (s) => s.runnerFds),
  };
}

const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;

export function formatSample(s: Sample): string {
  const rate = s.requests ? ((100 * s.errors) / s.requests).toFixed(2) : '0.00';
  return `t=${s.t.toFixed(0).padStart(4)} s  requests ${String(s.requests).padStart(6)}  errors ${s.errors} (${rate}%)  daemon RSS ${mib(s.daemonRssBytes)} fds ${s.daemonFds}  runners ${s.runners}: RSS ${mib(s.runnerRssBytes)} fds ${s.runnerFds}`;
}

/** The one-line summary the soak ends with. */
export function formatSummary(x: Summary, seconds: number): string {
  const k = x.byKind;
  return (
    `soak: ${x.requests} requests in ${(seconds / 60).toFixed(1)} min (${k.ok} plain, ${k['ok-stream']} streamed, ${k.vanish} clients vanished mid-stream, ${k.malformed} malformed bodies); ` +
    `${x.errors} unexpected errors (${(100 * x.errorRate).toFixed(3)}%); served mean ${x.meanMs.toFixed(0)} ms p99 ${x.p99Ms.toFixed(0)} ms; ` +
    `daemon RSS ${mib(x.daemonRss.first)} -> ${mib(x.daemonRss.last)} (max ${mib(x.daemonRss.max)}), fds ${x.daemonFds.first} -> ${x.daemonFds.last} (max ${x.daemonFds.max}); ` +
    `runner RSS ${mib(x.runnerRss.first)} -> ${mib(x.runnerRss.last)}, fds ${x.runnerFds.first} -> ${x.runnerFds.last}`
  );
}

/** The pid's resident set in bytes from the text of /proc/PID/status; 0 when the line is missing. */
export function rssFromStatus(status: string): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
  return m ? Number(m[1]) * 1024 : 0;
}

/** The parent pid from the text of /proc/PID/stat (the command name may hold spaces and parentheses). */
export function ppidFromStat(stat: string): number {
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(rest[1]);
}

/** A seeded uniform [0, 1) source (the engine's PRNG), so a soak's request mix is the same each run. */
export function seeded(seed: number): () => number {
  const p = new Prng(seed);
  return () => p.next();
}
