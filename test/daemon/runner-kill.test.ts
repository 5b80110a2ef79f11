/**
 * A runner process killed with kill -9 under a running stream, on a real daemon process (`orchard
 * start` on loopback, no namespaces needed): the stream ends with an error event within 2 s (no
 * hang, no [DONE] as if it had finished), the daemon stays up, the next request is served by a new
 * runner, and the killed one is not left behind (no zombie, no second runner for the model).
 * The model is generated with a 2048-token context and never ends a text by itself (its
 * end-of-text row is zeroed), so the stream is still running when its runner dies.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLoopbackDaemon, waitFor, type LoopbackDaemon } from '../harness/daemons.js';
import { writeEndlessModel } from '../harness/endless-model.js';

const MODEL = 'test/kill-llama';
let daemon: LoopbackDaemon;
let dataDir: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-runner-kill-'));
  const dir = join(dataDir, 'models', ...MODEL.split('/'));
  mkdirSync(dir, { recursive: true });
  writeEndlessModel(dir, 23);
  daemon = await startLoopbackDaemon(dataDir, { args: ['--name', 'runner-kill'], env: { ORCHARD_LOG_LEVEL: 'info' } });
  await waitFor('the node with its profile', async () => ((await (await fetch(`${daemon.base}/api/cluster`)).json()) as { nodes: unknown[] }).nodes.length === 1 || undefined, 60_000, 200);
}, 120_000);

afterAll(() => {
  if (daemon) {
    for (const pid of children(daemon.child.pid!)) process.kill(pid, 'SIGKILL');
    daemon.child.kill('SIGKILL');
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** Live children of `pid` and whether each is a zombie. */
function childStates(pid: number): { pid: number; zombie: boolean }[] {
  let out = '';
  try {
    out = execFileSync('ps', ['-o', 'pid=,stat=', '--ppid', String(pid)], { encoding: 'utf8' });
  } catch {
    return []; // ps exits 1 when there are none
  }
  return out
    .split('\n')
    .filter(Boolean)
    .map((l) => l.trim().split(/\s+/))
    .map(([p, stat]) => ({ pid: Number(p), zombie: stat.startsWith('Z') }));
}
const children = (pid: number) => childStates(pid).map((c) => c.pid);

const complete = (prompt: string, maxTokens: number, stream: boolean, signal?: AbortSignal) =>
  fetch(`${daemon.base}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, prompt, max_tokens: maxTokens, temperature: 0, stream }), signal });

describe('a runner killed with kill -9 mid-stream', () => {
  it('ends the stream with an error within 2 s; the next request is served by a new runner; none left behind', async () => {
    const first = await complete('In the beginning', 4, false, AbortSignal.timeout(90_000));
    expect(first.status, await first.clone().text()).toBe(200);
    const [victim] = children(daemon.child.pid!);
    expect(victim, 'a runner process under the daemon').toBeGreaterThan(0);

    const res = await complete('Tell the whole story', 1800, true, AbortSignal.timeout(60_000));
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let raw = '';
    let killedAt = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      raw += decoder.decode(value, { stream: true });
      if (!killedAt && raw.split('\n').filter((l) => l.startsWith('data: {')).length >= 5) {
        killedAt = Date.now();
        process.kill(victim, 'SIGKILL');
      }
    }
    const endedMs = Date.now() - killedAt;
    expect(killedAt, 'the stream ran long enough to kill its runner').toBeGreaterThan(0);
    expect(raw).not.toContain('data: [DONE]');
    const events = raw.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    const last = events[events.length - 1];
    expect(last.error, `the last event is an error: ${JSON.stringify(last)}`).toBeDefined();
    expect(last.error.message).not.toMatch(/^internal error$/);
    expect(endedMs).toBeLessThan(2000);

    // The daemon answers, and the next request (one try) is served by a new runner.
    expect((await fetch(`${daemon.base}/healthz`)).ok).toBe(true);
    const t0 = Date.now();
    const again = await complete('Again', 8, false, AbortSignal.timeout(60_000));
    const againMs = Date.now() - t0;
    expect(again.status, await again.clone().text()).toBe(200);
    expect(((await again.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(8);
    // The killed runner is reaped (not a zombie under the daemon) and only the new one runs.
    const after = await waitFor('the killed runner reaped', () => {
      const c = childStates(daemon.child.pid!);
      return !c.some((x) => x.pid === victim) && c;
    }, 10_000, 200);
    expect(after.filter((c) => c.zombie)).toEqual([]);
    expect(after).toHaveLength(1);
    console.log(`runner kill -9: the stream's error after ${endedMs} ms; the next request served in ${againMs} ms by runner ${after[0].pid}`);
  }, 180_000);
});
