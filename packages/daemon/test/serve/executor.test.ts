/**
 * The driver-side request handling with a scripted runner: queue limit (429), client abort frees the
 * slot at once, stop strings cut the text and cancel the loop, eos ends with finish 'stop'.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadModelConfig, loadTokenizer } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { InstanceExecutor } from '../../src/serving/executor.js';
import { ServeError } from '../../src/requests/errors.js';
import type { ServeEvent, ServeRequest } from '../../src/requests/request.js';
import type { RunnerProcess } from '../../src/runner/runner-process.js';
import type { GenerateRequest } from '../../src/runner/requests.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-exec-'));
  writeRandomModel(dir, { numLayers: 1, hiddenSize: 32, seed: 2 });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A runner that streams the ids of `text` one every `everyMs`, honouring cancellation. */
function scriptedRunner(ids: number[], everyMs: number) {
  const calls: GenerateRequest[] = [];
  const runner = {
    dead: null,
    ready: true,
    calls,
    async generate(req: GenerateRequest, onToken: (id: number) => void, signal?: AbortSignal) {
      calls.push(req);
      const out: number[] = [];
      for (const id of ids.slice(0, req.maxTokens)) {
        if (signal?.aborted) return { tokens: out, finishReason: 'abort' as const, promptTokens: req.promptIds.length, prefillMs: 1, decodeMs: 1 };
        await new Promise((r) => setTimeout(r, everyMs));
        out.push(id);
        onToken(id);
        if (req.stopTokenIds.includes(id)) return { tokens: out, finishReason: 'stop' as const, promptTokens: req.promptIds.length, prefillMs: 1, decodeMs: 1 };
      }
      return { tokens: out, finishReason: 'length' as const, promptTokens: req.promptIds.length, prefillMs: 1, decodeMs: 10 };
    },
  };
  return runner;
}

const req = (o: Partial<ServeRequest> = {}): ServeRequest => ({ kind: 'completion', prompt: 'Hi', temperature: 0, topP: 1, seed: 0, stop: [], maxTokens: 50, ...o });

function collect() {
  const events: ServeEvent[] = [];
  return { events, emit: (e: ServeEvent) => events.push(e), text: () => events.flatMap((e) => (e.type === 'text' ? [e.text] : [])).join('') };
}

describe('InstanceExecutor', () => {
  it('streams text, cuts at a stop string and cancels the runner loop', async () => {
    const tok = loadTokenizer(dir);
    const ids = tok.encode('abc STOP def ghi', { addSpecialTokens: false });
    const runner = scriptedRunner(ids, 1);
    const ex = new InstanceExecutor(runner as unknown as RunnerProcess, dir, loadModelConfig(dir), 256, { maxQueue: 2, defaultMaxTokens: 50 });
    const c = collect();
    await ex.run(req({ stop: [' STOP'] }), c.emit, new AbortController().signal);
    expect(c.text()).toBe('abc');
    const done = c.events.at(-1) as Extract<ServeEvent, { type: 'done' }>;
    expect(done.type).toBe('done');
    expect(done.finishReason).toBe('stop');
    expect(done.completionTokens).toBeLessThan(ids.length);
  });

  it('eos ends the answer with finish "stop" and is not part of the text', async () => {
    const config = loadModelConfig(dir);
    const tok = loadTokenizer(dir);
    const ids = [...tok.encode('ok', { addSpecialTokens: false }), config.eosTokenIds[0], ...tok.encode('zz', { addSpecialTokens: false })];
    const ex = new InstanceExecutor(scriptedRunner(ids, 1) as unknown as RunnerProcess, dir, config, 256, { maxQueue: 2, defaultMaxTokens: 50 });
    const c = collect();
    await ex.run(req(), c.emit, new AbortController().signal);
    expect(c.text()).toBe('ok');
    expect((c.events.at(-1) as any).finishReason).toBe('stop');
  });

  it('refuses beyond the queue with 429, and a client that leaves frees its slot at once', async () => {
    const ex = new InstanceExecutor(scriptedRunner(Array.from({ length: 50 }, (_, i) => 97 + (i % 20)), 20) as unknown as RunnerProcess, dir, loadModelConfig(dir), 256, { maxQueue: 1, defaultMaxTokens: 50 });
    const first = new AbortController();
    const p1 = ex.run(req(), () => undefined, first.signal);
    const c2 = collect();
    const p2 = ex.run(req({ maxTokens: 3 }), c2.emit, new AbortController().signal);
    await expect(ex.run(req(), () => undefined, new AbortController().signal)).rejects.toMatchObject({ status: 429, code: 'queue_full' });
    expect(ex.load).toMatchObject({ active: 1, queued: 1, capacity: 1 });
    const t0 = Date.now();
    setTimeout(() => first.abort(), 50);
    await p1;
    await p2;
    expect(Date.now() - t0).toBeLessThan(50 * 20); // not the 50 tokens x 20 ms the first request asked for
    expect((c2.events.at(-1) as any).completionTokens).toBe(3);
    expect(ex.load).toMatchObject({ active: 0, queued: 0, capacity: 1 });
  });

  it('rejects a prompt longer than the context with 400 and clamps max_tokens to the room left', async () => {
    const runner = scriptedRunner([97, 98], 1);
    const ex = new InstanceExecutor(runner as unknown as RunnerProcess, dir, loadModelConfig(dir), 16, { maxQueue: 1, defaultMaxTokens: 50 });
    await expect(ex.run(req({ prompt: 'x'.repeat(40) }), () => undefined, new AbortController().signal)).rejects.toBeInstanceOf(ServeError);
    await ex.run(req({ prompt: 'abcd', maxTokens: 1000 }), () => undefined, new AbortController().signal);
    expect(runner.calls[0].maxTokens).toBe(16 - runner.calls[0].promptIds.length);
  });

  it('a listener that throws (its connection closed) cancels the request; nothing escapes into the runner callback', async () => {
    const tok = loadTokenizer(dir);
    const ids = tok.encode('one two three four five six seven eight', { addSpecialTokens: false });
    const runner = scriptedRunner(ids, 1);
    let escaped = 0;
    const generate = runner.generate.bind(runner);
    runner.generate = (r, onToken, signal) =>
      generate(r, (id) => {
        try {
          onToken(id);
        } catch {
          escaped++;
        }
      }, signal);
    const ex = new InstanceExecutor(runner as unknown as RunnerProcess, dir, loadModelConfig(dir), 256, { maxQueue: 2, defaultMaxTokens: 50 });
    let texts = 0;
    const emit = (e: ServeEvent) => {
      if (e.type === 'text' && ++texts === 2) throw new Error('Cannot write to a stream that is closed');
    };
    await ex.run(req(), emit, new AbortController().signal).catch(() => undefined);
    expect(escaped).toBe(0);
    expect(texts).toBe(2);
    expect(ex.load.active).toBe(0);
    expect(runner.calls).toHaveLength(1);
  });

  it("hands a request's speculate to the runner; a stop string inside a burst of tokens (a speculating step's) cuts the text there", async () => {
    const tok = loadTokenizer(dir);
    const ids = tok.encode('abc STOP def ghi', { addSpecialTokens: false });
    const calls: GenerateRequest[] = [];
    // Every token of the answer arrives in one go, before a cancel could land: a step that accepted them all.
    const runner = {
      dead: null,
      ready: true,
      async generate(r: GenerateRequest, onToken: (id: number) => void) {
        calls.push(r);
        for (const id of ids) onToken(id);
        return { tokens: ids, finishReason: 'length' as const, promptTokens: r.promptIds.length, prefillMs: 1, decodeMs: 1 };
      },
    };
    const ex = new InstanceExecutor(runner as unknown as RunnerProcess, dir, loadModelConfig(dir), 256, { maxQueue: 2, defaultMaxTokens: 50 });
    const c = collect();
    await ex.run(req({ stop: [' STOP'], speculate: 'prompt-lookup' }), c.emit, new AbortController().signal);
    expect(calls[0].speculate).toBe('prompt-lookup');
    expect(c.text()).toBe('abc');
    const done = c.events.at(-1) as Extract<ServeEvent, { type: 'done' }>;
    expect(done.finishReason).toBe('stop');
    expect(done.completionTokens).toBeLessThan(ids.length);
    await ex.run(req(), collect().emit, new AbortController().signal);
    expect(calls[1].speculate).toBeUndefined();
  });
});
