/**
 * Two daemons in this process (loopback, no mDNS, the second bootstraps to the first): a model
 * placed as a 2-stage pipeline and as tensor parallel 2 answers through the OpenAI endpoints of
 * either daemon with the unsplit model's greedy text (also four requests at once, one speculating, which
 * the split instance batches); `orchard plan`, `GET /api/plan` and the
 * coordinator's placement make the same plan of the same model directory and cluster.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instanceLayoutOf } from '@orchard/engine';
import type { Orchard } from '../../src/orchard.js';
import { api, greedyText, runCli, startServingPair, waitFor } from './in-process-pod.js';

const MODEL = 'test/rand-llama';
const prompt = 'In the beginning';
let daemons: Orchard[] = [];
let modelDir: string;
let stopPair: () => Promise<void> = async () => {};

beforeAll(async () => {
  ({ daemons, modelDir, stop: stopPair } = await startServingPair('orchard-serve-pod-', { repo: MODEL, options: { numLayers: 4, hiddenSize: 64, seed: 5, maxPositionEmbeddings: 256 } }));
}, 60_000);

afterAll(() => stopPair());

const expected = (maxTokens: number) => greedyText(modelDir, prompt, maxTokens);

describe('serving on a 2-daemon pod', () => {
  it('orchard plan, GET /api/plan and the placement the coordinator makes are the same plan', async () => {
    const cluster = await (await api(daemons[0], '/api/cluster')).text();
    const file = join(mkdtempSync(join(os.tmpdir(), 'orchard-same-plan-')), 'cluster.json');
    writeFileSync(file, cluster);
    const cli = await runCli(['plan', '--model', modelDir, '--cluster', file, '--json']);
    expect(cli.code, cli.stderr).toBe(0);
    const planned = JSON.parse(cli.stdout);
    const fromCli = { layout: instanceLayoutOf(planned.stages), ranks: planned.stages.flatMap((st: any) => st.nodes), decode: planned.predicted.decodeTokensPerSecond };
    const viaApi = (await (await api(daemons[1], `/api/plan?model=${encodeURIComponent(MODEL)}`)).json()) as any;
    expect({ layout: viaApi.plan.layout, ranks: viaApi.plan.ranks, decode: viaApi.plan.predicted.decodeTokensPerSecond }).toEqual(fromCli);
    expect(viaApi.context).toBe(planned.request.contextTokens);
    const placed = (await (await api(daemons[1], '/api/instances', { method: 'POST', body: JSON.stringify({ model: MODEL, wait: false }) })).json()) as any;
    const entry = await waitFor('the instance in the shared state', () => daemons[0].daemon.replica.state.instances[placed.instance.id], 10_000, 100);
    expect({ layout: entry.plan.layout, ranks: entry.plan.ranks, decode: entry.plan.predicted?.decodeTokensPerSecond }).toEqual(fromCli);
    expect(entry.plan.context).toBe(planned.request.contextTokens);
    const del = await api(daemons[0], `/api/instances/${placed.instance.id}`, { method: 'DELETE' });
    expect(del.status).toBe(204);
  }, 60_000);

  for (const strategy of ['pipeline', 'tensor'] as const) {
    it(`${strategy} over 2 nodes: completions equal the unsplit greedy text, from either daemon`, async () => {
      const placed = await api(daemons[1], '/api/instances', { method: 'POST', body: JSON.stringify({ model: MODEL, strategy, nodes: 2 }) });
      const body = (await placed.json()) as any;
      expect(placed.status, JSON.stringify(body)).toBe(201);
      expect(body.instance.strategy).toBe(strategy);
      expect(new Set(body.instance.nodes).size).toBe(2);
      const plan = (await (await api(daemons[0], `/api/plan?model=${encodeURIComponent(MODEL)}&strategy=${strategy}&nodes=2`)).json()) as any;
      expect(plan.plan.layout.tensor).toBe(strategy === 'tensor' ? 2 : 1);
      expect(plan.plan.ranks).toHaveLength(2);
      const listed = await waitFor('the instance listed as ready on the other daemon', async () => {
        const l = (await (await api(daemons[0], '/api/instances')).json()) as any;
        return l.instances.find((i: any) => i.id === body.instance.id)?.status.ready ? l : undefined;
      }, 10_000, 200);
      expect(JSON.stringify(listed)).not.toContain('secret');
      const status = (await (await api(daemons[0], '/api/status')).json()) as any;
      expect(status.instances.length).toBeGreaterThan(0);
      expect(JSON.stringify(status.instances)).not.toContain('secret');
      const want = await expected(16);
      for (const d of daemons) {
        const res = await api(d, '/v1/completions', { method: 'POST', body: JSON.stringify({ model: MODEL, prompt, max_tokens: 16, temperature: 0 }) });
        const out = (await res.json()) as any;
        expect(res.status, JSON.stringify(out)).toBe(200);
        expect(out.choices[0].text).toBe(want);
        expect(out.usage.completion_tokens).toBeGreaterThan(0);
      }
      // Several requests at once, through both daemons, share the split instance's steps (batched on
      // every rank); one speculates. Each answer is the unsplit greedy text of its own prompt.
      const prompts = ['In the beginning', 'And God said', 'Let there be light', 'the earth was'];
      const wants = await Promise.all(prompts.map((p) => greedyText(modelDir, p, 12)));
      const outs = await Promise.all(
        prompts.map(async (p, i) => {
          const res = await api(daemons[i % 2], '/v1/completions', { method: 'POST', body: JSON.stringify({ model: MODEL, prompt: p, max_tokens: 12, temperature: 0, ...(i === 0 ? { speculate: 'prompt-lookup' } : {}) }) });
          return { status: res.status, json: (await res.json()) as any };
        }),
      );
      outs.forEach((o, i) => {
        expect(o.status, JSON.stringify(o.json)).toBe(200);
        expect(o.json.choices[0].text, prompts[i]).toBe(wants[i]);
      });
      if (strategy === 'pipeline') {
        // The terminal client against the same daemon: streams the reply and reports tokens/s.
        const out = await runCli(['chat', MODEL, '--url', `http://127.0.0.1:${daemons[0].apiPort}`, '-m', 'hello', '--temperature', '0', '--max-tokens', '12']);
        const viaApi = (await (await api(daemons[0], '/v1/chat/completions', { method: 'POST', body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 12, temperature: 0 }) })).json()) as any;
        expect(out.stdout).toBe(viaApi.choices[0].message.content);
        expect(out.stderr).toMatch(/\[\d+ tokens, [\d.]+ tok\/s/);
        // Interactive: the second question is asked with the first exchange as history.
        const url = `http://127.0.0.1:${daemons[1].apiPort}`;
        const talk = await runCli(['chat', MODEL, '--url', url, '--temperature', '0', '--max-tokens', '6'], 'hello\nand then?\n');
        expect(talk.code, talk.stderr).toBe(0);
        const ask = async (messages: { role: string; content: string }[]) =>
          ((await (await api(daemons[1], '/v1/chat/completions', { method: 'POST', body: JSON.stringify({ model: MODEL, messages, max_tokens: 6, temperature: 0 }) })).json()) as any).choices[0].message.content as string;
        const first = await ask([{ role: 'user', content: 'hello' }]);
        const second = await ask([{ role: 'user', content: 'hello' }, { role: 'assistant', content: first }, { role: 'user', content: 'and then?' }]);
        expect(talk.stdout).toContain(first);
        expect(talk.stdout).toContain(second);
        expect(talk.stdout.indexOf(second, talk.stdout.indexOf(first) + first.length)).toBeGreaterThan(0);
      }
      if (strategy === 'tensor') {
        // The CLI side of instances: listed by `orchard models`, removed by `orchard unload`.
        const url = `http://127.0.0.1:${daemons[0].apiPort}`;
        const models = await runCli(['models', '--json', '--url', url]);
        const listed = JSON.parse(models.stdout);
        expect(listed.models).toContain(MODEL);
        expect(listed.instances.map((i: any) => i.id)).toContain(body.instance.id);
        const un = await runCli(['unload', body.instance.id, '--url', url]);
        expect(un.code, un.stderr).toBe(0);
        expect(un.stdout).toContain(`unloaded ${body.instance.id}`);
        const again = await runCli(['unload', body.instance.id, '--url', url]);
        expect(again.code).toBe(4);
        expect(again.stderr).toMatch(/no instance or model/);
      } else {
        const del = await api(daemons[0], `/api/instances/${body.instance.id}`, { method: 'DELETE' });
        expect(del.status).toBe(204);
      }
    }, 120_000);
  }
});
