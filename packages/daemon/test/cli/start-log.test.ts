/**
 * The foreground daemon's log as a person sees it: readable lines in a terminal (a tmux pseudo-TTY),
 * JSON lines through a pipe, and in both one line per request (model, tokens, tok/s, TTFT, status);
 * `orchard logs` finds the running daemon's log file by asking it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../../../../test/harness/daemons.js';
import { runCli } from '../serve/in-process-pod.js';
import { startTmux, tmuxAvailable, type TmuxSession } from './tmux.js';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '../../src/cli/main.ts');
const dirs: string[] = [];
const START = (dataDir: string) => ['start', '--data-dir', dataDir, '--listen', '/ip4/127.0.0.1/tcp/0', '--no-mdns', '--api-port', '0', '--name', 'logtest'];

async function chat(port: number): Promise<void> {
  // Placement needs this node's profile in the pod's state (a second or two after the API answers).
  await waitFor('the node in the pod', async () => ((await (await fetch(`http://127.0.0.1:${port}/api/cluster`)).json()) as { nodes: unknown[] }).nodes.length > 0 || undefined, 60_000, 200);
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'orchard-demo', messages: [{ role: 'user', content: 'In the beginning' }], max_tokens: 8, temperature: 0 }),
  });
  const body = await res.text();
  expect(res.status, body).toBe(200);
}

let term: TmuxSession | undefined;
let child: ChildProcess | undefined;
afterAll(() => {
  term?.kill();
  child?.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe.skipIf(!tmuxAvailable())('the foreground daemon log', () => {
  it('in a terminal: readable lines with a request line, and orchard logs reads the same daemon', async () => {
    const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-startlog-'));
    dirs.push(dataDir);
    term = startTmux([process.execPath, '--import', 'tsx', CLI, ...START(dataDir)], { NO_COLOR: '1' }, { cols: 400, rows: 60 });
    const port = Number(await waitFor('the daemon to start', () => /"api":"http:\/\/127\.0\.0\.1:(\d+)"/.exec(term!.screen())?.[1], 120_000, 200));
    await chat(port);
    const line = await waitFor('the request line', () => /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: request orchard-demo 200 · \d+\+\d+ tokens · .*TTFT \d+ ms · \d+ ms .*$/m.exec(term!.screen())?.[0], 30_000, 100);
    expect(line).toMatch(/"request":\{"model":"orchard-demo","kind":"chat","status":200,"promptTokens":\d+,"completionTokens":\d+/);
    // Nothing on the terminal is a raw JSON entry.
    expect(term.screen()).not.toMatch(/^\{"level":/m);

    const logs = await runCli(['logs', '--url', `http://127.0.0.1:${port}`, '-n', '200', '--json']);
    expect(logs.code, logs.stderr).toBe(0);
    const entries = logs.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(entries.find((e) => e.request)).toMatchObject({ msg: expect.stringMatching(/^request orchard-demo 200/), request: { status: 200, kind: 'chat' } });
    const readable = await runCli(['logs', '--url', `http://127.0.0.1:${port}`, '-n', '200']);
    expect(readable.stdout).toMatch(/INFO: request orchard-demo 200 · /);
    expect(readable.stdout).not.toMatch(/^\{/m);
  }, 240_000);

  it('through a pipe: JSON lines, the request line among them', async () => {
    const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-startlog-'));
    dirs.push(dataDir);
    child = spawn(process.execPath, ['--import', 'tsx', CLI, ...START(dataDir)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    const port = Number(await waitFor('the daemon to start', () => /"api":"http:\/\/127\.0\.0\.1:(\d+)"/.exec(out)?.[1], 120_000, 200));
    await chat(port);
    await waitFor('the request line', () => /"msg":"request orchard-demo 200/.test(out) || undefined, 30_000, 100);
    const lines = out.trim().split('\n');
    for (const l of lines) expect(() => JSON.parse(l), l).not.toThrow();
    const request = lines.map((l) => JSON.parse(l)).find((e) => e.request);
    expect(request.request).toMatchObject({ model: 'orchard-demo', status: 200, kind: 'chat' });
    expect(request.request.completionTokens).toBeGreaterThan(0);
    expect(request.request.ttftMs).toBeGreaterThanOrEqual(0);
    // The other dialects' routes log the same line.
    const post = (path: string, body: object) => fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect((await post('/v1/messages', { model: 'orchard-demo', max_tokens: 4, messages: [{ role: 'user', content: 'Once' }] })).status).toBe(200);
    expect((await post('/api/chat', { model: 'orchard-demo', stream: false, options: { num_predict: 4 }, messages: [{ role: 'user', content: 'Once' }] })).status).toBe(200);
    expect((await post('/v1/responses', { model: 'orchard-demo', max_output_tokens: 4, input: 'Once' })).status).toBe(200);
    const requests = () => out.trim().split('\n').map((l) => JSON.parse(l)).filter((e) => e.request);
    await waitFor('a request line per dialect', () => requests().length >= 4 || undefined, 30_000, 100);
    expect(requests().map((e) => e.request.status)).toEqual([200, 200, 200, 200]);
  }, 240_000);
});
