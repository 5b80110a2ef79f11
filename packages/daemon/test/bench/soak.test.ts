/**
 * `pnpm bench:soak` (bench/soak.ts): its judging and summing rules (soak-stats.ts) on made-up
 * outcomes, then a few seconds of the real thing against a daemon on loopback — the summary line
 * comes out with every kind of request sent and no unexpected error.
 */
import { execFile } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { formatSummary, ppidFromStat, quantile, rssFromStatus, seeded, summarize, unexpected, type Outcome, type Sample } from '../../bench/soak-stats.js';

const o = (x: Partial<Outcome>): Outcome => ({ kind: 'ok', route: 'r', status: 200, ms: 10, ...x });
const s = (t: number, rss: number, fds: number): Sample => ({ t, requests: 0, errors: 0, daemonRssBytes: rss, runnerRssBytes: 2 * rss, runners: 1, daemonFds: fds, runnerFds: fds + 1 });

describe('soak rules', () => {
  it('judges each kind of request by what it asked for', () => {
    expect(unexpected(o({}))).toBeNull();
    expect(unexpected(o({ status: 503 }))).toMatch(/HTTP 503/);
    expect(unexpected(o({ status: 0, error: 'ECONNRESET' }))).toMatch(/ECONNRESET/);
    expect(unexpected(o({ kind: 'ok-stream', brokenStream: 'stream ended without [DONE]' }))).toMatch(/\[DONE\]/);
    expect(unexpected(o({ timedOut: true, status: 0 }))).toMatch(/hang/);
    // A malformed body must be refused with a 4xx, neither served nor failed.
    expect(unexpected(o({ kind: 'malformed', status: 400 }))).toBeNull();
    expect(unexpected(o({ kind: 'malformed', status: 200 }))).toMatch(/malformed body answered 200/);
    expect(unexpected(o({ kind: 'malformed', status: 500 }))).toMatch(/HTTP 500/);
    // A client that vanishes aborts its own request; a 5xx or a hang still count.
    expect(unexpected(o({ kind: 'vanish', status: 0, error: 'client vanished' }))).toBeNull();
    expect(unexpected(o({ kind: 'vanish', status: 502 }))).toMatch(/HTTP 502/);
    expect(unexpected(o({ kind: 'vanish', status: 0, timedOut: true }))).toMatch(/hang/);
  });

  it('sums outcomes and samples into the summary', () => {
    const outcomes = [o({ ms: 10 }), o({ kind: 'ok-stream', ms: 30 }), o({ kind: 'vanish', status: 0 }), o({ kind: 'malformed', status: 400 }), o({ status: 500, ms: 5 }), o({ status: 500, ms: 5 })];
    const x = summarize(outcomes, [s(0, 100, 30), s(10, 300, 40), s(20, 200, 35)]);
    expect(x.requests).toBe(6);
    expect(x.byKind).toEqual({ ok: 3, 'ok-stream': 1, vanish: 1, malformed: 1 });
    expect(x.errors).toBe(2);
    expect(x.errorRate).toBeCloseTo(2 / 6);
    expect(x.firstErrors).toEqual([['r: HTTP 500', 2]]);
    expect(x.meanMs).toBeCloseTo((10 + 30 + 5 + 5) / 4);
    expect(x.daemonRss).toEqual({ first: 100, last: 200, max: 300 });
    expect(x.daemonFds).toEqual({ first: 30, last: 35, max: 40 });
    expect(x.runnerFds).toEqual({ first: 31, last: 36, max: 41 });
    expect(formatSummary(x, 120)).toMatch(/^soak: 6 requests in 2\.0 min .* 2 unexpected errors \(33\.333%\)/);
    expect(summarize([], []).errorRate).toBe(0);
  });

  it('reads /proc text and draws a repeatable mix', () => {
    expect(rssFromStatus('Name:\tnode\nVmRSS:\t  2048 kB\nThreads: 7\n')).toBe(2048 * 1024);
    expect(rssFromStatus('Name:\tzombie\n')).toBe(0);
    expect(ppidFromStat('123 (node (x) y) S 45 123 123 0')).toBe(45);
    expect(quantile([5, 1, 3, 2, 4], 0.99)).toBe(5);
    expect(quantile([5, 1, 3, 2, 4], 0.5)).toBe(3);
    const a = seeded(7);
    const b = seeded(7);
    const xs = Array.from({ length: 50 }, () => a());
    expect(xs).toEqual(Array.from({ length: 50 }, () => b()));
    expect(xs.every((v) => v >= 0 && v < 1)).toBe(true);
    expect(new Set(xs).size).toBe(50);
  });
});

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');

describe.skipIf(process.platform !== 'linux')('soak smoke run', () => {
  it('a few seconds against a daemon on loopback: every kind of request sent, none unexpected, exit 0', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', join(ROOT, 'packages/daemon/bench/soak.ts'), '--minutes', '0.1', '--sample-seconds', '2', '--concurrency', '2'], { cwd: ROOT, timeout: 150_000 });
    const line = stdout.split('\n').find((l) => l.startsWith('soak: '));
    expect(line, stdout).toBeDefined();
    const m = /soak: (\d+) requests .*\((\d+) plain, (\d+) streamed, (\d+) clients vanished mid-stream, (\d+) malformed bodies\); (\d+) unexpected errors/.exec(line!)!;
    const [total, plain, streamed, vanished, malformed, errors] = m.slice(1).map(Number);
    expect(total).toBeGreaterThan(10);
    for (const n of [plain, streamed, vanished, malformed]) expect(n).toBeGreaterThan(0);
    expect(errors).toBe(0);
    expect(stdout).toMatch(/t= +\d+ s .*daemon RSS [\d.]+ MiB fds \d+ +runners 1: RSS/);
  }, 180_000);

  it('names a bad flag', async () => {
    const err = await promisify(execFile)(process.execPath, ['--import', 'tsx', join(ROOT, 'packages/daemon/bench/soak.ts'), '--minutes', 'lots'], { cwd: ROOT }).catch((e: { stderr: string }) => e);
    expect((err as { stderr: string }).stderr).toMatch(/--minutes must be a positive number, got 'lots'/);
  });
});
