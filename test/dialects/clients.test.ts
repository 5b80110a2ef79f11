/**
 * The official client packages against a running daemon (a separate `orchard start` process on
 * loopback) serving a random model with Qwen 2.5's published chat template and special tokens:
 *   openai: tool calls round-trip (call → tool result → answer), streaming and not; JSON-schema output
 *           validated with ajv on 50 sampled runs at temperature 1; logprobs.
 *   @anthropic-ai/sdk: tool_use → tool_result → answer; the stream's events parsed by the SDK; count_tokens.
 *   ollama: list, show, chat (streaming and not), pull from a local mock hub.
 * And the request sequences of the integrations in docs/integrations.md (Claude Code, Codex CLI, Open
 * WebUI in both modes, Continue, Zed, the SDKs), replayed from test/dialects/recorded/*.json.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { Ajv } from 'ajv';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createReferenceBackend, embedTokens, loadModelConfig, loadShard, loadTokenizer, readEmbeddingConfig } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { familyModelOptions } from '../../packages/engine/test/fixtures/chat-templates/families.js';
import { startLoopbackDaemon, waitFor, type LoopbackDaemon } from '../harness/daemons.js';
import { startFakeHub, type FakeHub } from '../harness/fake-hub.js';

const MODEL = 'test-org/qwen-clients';
const EMBED = 'test-org/qwen3-embedding';
let embedDir = '';
let modelDir = '';
const PULLED = 'test-org/pulled-model';
let daemon: LoopbackDaemon;
let hub: FakeHub;
const dirs: string[] = [];

beforeAll(async () => {
  const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-clients-'));
  const hubSrc = mkdtempSync(join(os.tmpdir(), 'orchard-clients-hub-'));
  dirs.push(dataDir, hubSrc);
  modelDir = join(dataDir, 'models', ...MODEL.split('/'));
  mkdirSync(modelDir, { recursive: true });
  writeRandomModel(modelDir, familyModelOptions('qwen25', { seed: 11 }));
  // An embedding model in Qwen3-Embedding's layout: last-token pooling and a Normalize module.
  embedDir = join(dataDir, 'models', ...EMBED.split('/'));
  writeRandomModel(embedDir, { variant: 'qwen3', numLayers: 2, seed: 5 });
  mkdirSync(join(embedDir, '1_Pooling'));
  writeFileSync(join(embedDir, 'modules.json'), JSON.stringify([
    { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
    { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
    { idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' },
  ]));
  writeFileSync(join(embedDir, '1_Pooling', 'config.json'), JSON.stringify({ pooling_mode_lasttoken: true, pooling_mode_mean_tokens: false, pooling_mode_cls_token: false }));
  writeRandomModel(hubSrc, { numLayers: 1, hiddenSize: 32, intermediateSize: 64, numHeads: 2, numKvHeads: 1, seed: 2 });
  hub = await startFakeHub({ [PULLED]: hubSrc });
  daemon = await startLoopbackDaemon(dataDir, { args: ['--name', 'clients'], env: { HF_ENDPOINT: hub.url, ORCHARD_LOG_LEVEL: 'warn' } });
  // Placement needs the node's profile in the cluster state (a request before it is a 503).
  await waitFor('the node with its profile', async () => ((await (await fetch(`${daemon.base}/api/cluster`)).json()) as { nodes: unknown[] }).nodes.length === 1 || undefined, 60_000, 200);
}, 120_000);

afterAll(async () => {
  daemon?.child.kill('SIGKILL');
  await hub?.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const weatherParams = { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'], additionalProperties: false };

describe('openai', () => {
  const client = () => new OpenAI({ baseURL: `${daemon.base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
  const tools: OpenAI.Chat.ChatCompletionTool[] = [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: weatherParams } }];

  it('tool call round trip: call, tool result, answer', async () => {
    const oa = client();
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
    const first = await oa.chat.completions.create({ model: MODEL, messages, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 250, seed: 1 });
    expect(first.choices[0].finish_reason).toBe('tool_calls');
    const call = first.choices[0].message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe('get_weather');
    messages.push(first.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'sunny, 21 C' });
    const answer = await oa.chat.completions.create({ model: MODEL, messages, tools, tool_choice: 'none', max_tokens: 10, seed: 2 });
    expect(['stop', 'length']).toContain(answer.choices[0].finish_reason);
    expect(typeof answer.choices[0].message.content).toBe('string');
    // The second turn re-sends the first: its K/V came from the prefix cache, in whole 16-token blocks, and says so.
    const cached = answer.usage!.prompt_tokens_details!.cached_tokens!;
    expect(cached).toBeGreaterThan(0);
    expect(cached % 16).toBe(0);
    expect(cached).toBeLessThanOrEqual(first.usage!.prompt_tokens + first.usage!.completion_tokens);
  }, 120_000);

  it('tool call round trip, streaming (the SDK accumulates the tool_calls deltas)', async () => {
    const oa = client();
    const stream = oa.chat.completions.stream({ model: MODEL, messages: [{ role: 'user', content: 'Weather?' }], tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 250, seed: 3 });
    const done = await stream.finalChatCompletion();
    const call = done.choices[0].message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe('get_weather');
    expect(Object.keys(JSON.parse(call.function.arguments))).toEqual(['city']);
    const follow = oa.chat.completions.stream({ model: MODEL, messages: [{ role: 'user', content: 'Weather?' }, done.choices[0].message, { role: 'tool', tool_call_id: call.id, content: 'rain' }], max_tokens: 8, seed: 4 });
    expect(typeof (await follow.finalContent())).toBe('string');
  }, 120_000);

  it('JSON schema output validates (ajv) on 50 sampled runs at temperature 1', async () => {
    const oa = client();
    const schema = {
      type: 'object',
      properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0, maximum: 120 }, pet: { enum: ['cat', 'dog', 'none'] }, tags: { type: 'array', items: { type: 'string', maxLength: 5 }, maxItems: 3 } },
      required: ['name', 'age', 'pet', 'tags'],
      additionalProperties: false,
    };
    const validate = new Ajv().compile(schema);
    for (let seed = 1; seed <= 50; seed++) {
      const r = await oa.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'A person as JSON.' }], temperature: 1, seed, max_tokens: 200, response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } } });
      const text = r.choices[0].message.content!;
      expect(r.choices[0].finish_reason, text).toBe('stop');
      expect(validate(JSON.parse(text)), `${text} ${JSON.stringify(validate.errors)}`).toBe(true);
    }
  }, 300_000);

  it('Responses API: a function call, its output, the answer; streaming through the SDK', async () => {
    const oa = client();
    const rtools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'get_weather', description: 'Weather in a city', parameters: weatherParams, strict: true }];
    const first = await oa.responses.create({ model: MODEL, input: 'Weather in Paris?', tools: rtools, tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: 250 });
    expect(first.status).toBe('completed');
    const call = first.output.find((o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === 'function_call')!;
    expect(call.name).toBe('get_weather');
    expect(Object.keys(JSON.parse(call.arguments))).toEqual(['city']);
    const answer = await oa.responses.create({ model: MODEL, instructions: 'Be brief.', input: [{ role: 'user', content: 'Weather in Paris?' }, call, { type: 'function_call_output', call_id: call.call_id, output: 'sunny' }], tools: rtools, max_output_tokens: 8 });
    expect(['completed', 'incomplete']).toContain(answer.status);
    expect(answer.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);
    // the same request again: its prompt's whole blocks come from the prefix cache
    const again = await oa.responses.create({ model: MODEL, input: 'Weather in Paris?', tools: rtools, tool_choice: 'required', parallel_tool_calls: false, max_output_tokens: 4 });
    expect(again.usage!.input_tokens).toBe(first.usage!.input_tokens);
    expect(again.usage!.input_tokens_details.cached_tokens).toBe(16 * Math.floor((first.usage!.input_tokens - 1) / 16));
    const stream = oa.responses.stream({ model: MODEL, input: 'Hi', max_output_tokens: 6 });
    const types: string[] = [];
    stream.on('event', (e) => types.push(e.type));
    const final = await stream.finalResponse();
    expect(types[0]).toBe('response.created');
    expect(['response.completed', 'response.incomplete']).toContain(types.at(-1));
    // (openai 5.x folds response.completed into its final response, not response.incomplete.)
    expect(final.id).toMatch(/^resp_/);
    if (types.includes('response.output_text.delta')) expect(types.indexOf('response.content_part.added')).toBeLessThan(types.indexOf('response.output_text.delta'));
  }, 120_000);

  it('GET /v1/models/{id}', async () => {
    const m = await client().models.retrieve(MODEL);
    expect(m.id).toBe(MODEL);
    await expect(client().models.retrieve('nope/nope')).rejects.toMatchObject({ status: 404 });
  });

  it('logprobs', async () => {
    const r = await client().chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], logprobs: true, top_logprobs: 3, max_tokens: 4, seed: 5 });
    const lp = r.choices[0].logprobs!.content!;
    expect(lp.length).toBeGreaterThan(0);
    expect(lp[0].top_logprobs).toHaveLength(3);
  }, 60_000);
});

describe('@anthropic-ai/sdk', () => {
  const client = () => new Anthropic({ baseURL: daemon.base, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
  const tools: Anthropic.Tool[] = [{ name: 'get_weather', description: 'Weather in a city', input_schema: weatherParams as Anthropic.Tool.InputSchema }];

  it('tool_use → tool_result → answer', async () => {
    const an = client();
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }];
    const first = await an.messages.create({ model: MODEL, max_tokens: 250, messages, tools, tool_choice: { type: 'any', disable_parallel_tool_use: true } });
    expect(first.stop_reason).toBe('tool_use');
    const use = first.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(use.name).toBe('get_weather');
    messages.push({ role: 'assistant', content: first.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] });
    const answer = await an.messages.create({ model: MODEL, max_tokens: 10, system: 'Answer briefly.', messages, tools, tool_choice: { type: 'none' } });
    expect(['end_turn', 'max_tokens']).toContain(answer.stop_reason);
  }, 120_000);

  it('streaming: the SDK parses the events into a final message', async () => {
    const stream = client().messages.stream({ model: MODEL, max_tokens: 250, messages: [{ role: 'user', content: 'Weather?' }], tools, tool_choice: { type: 'tool', name: 'get_weather' } });
    const seen: string[] = [];
    stream.on('streamEvent', (e) => seen.push(e.type));
    const msg = await stream.finalMessage();
    expect(msg.content.map((b) => b.type), JSON.stringify({ seen, msg })).toContain('tool_use');
    expect(seen[0]).toBe('message_start');
    expect(seen).toContain('content_block_start');
    expect(seen.at(-1)).toBe('message_stop');
    const use = msg.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use')!;
    expect(typeof (use.input as { city: string }).city).toBe('string');
    expect(msg.stop_reason).toBe('tool_use');
  }, 120_000);

  it('count_tokens', async () => {
    const r = await client().messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: 'Hello' }] });
    expect(r.input_tokens).toBeGreaterThan(3);
  }, 60_000);
});

describe('sampling options through the clients', () => {
  const oa = () => new OpenAI({ baseURL: `${daemon.base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Say something.' }];

  it('openai: logit_bias is honoured (a banned-everything-else token repeats); penalties and seed reproduce', async () => {
    const tok = loadTokenizer(modelDir);
    const id = tok.encode('a', { addSpecialTokens: false })[0];
    const forced = await oa().chat.completions.create({ model: MODEL, messages, max_tokens: 4, temperature: 0, logit_bias: { [String(id)]: 100 } });
    expect(forced.choices[0].message.content).toBe(tok.decode([id, id, id, id]));
    // A frequency penalty strong enough pushes the biased token back after its first use.
    const penalised = await oa().chat.completions.create({ model: MODEL, messages, max_tokens: 4, temperature: 0, logit_bias: { [String(id)]: 10 }, frequency_penalty: 2, presence_penalty: 2 });
    expect(penalised.choices[0].message.content).not.toBe(tok.decode([id, id, id, id]));
    const run = () => oa().chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 1, seed: 77, frequency_penalty: 0.5, top_p: 0.95 });
    expect((await run()).choices[0].message.content).toBe((await run()).choices[0].message.content);
  }, 120_000);

  it('ollama: Ollama’s full default option set is accepted; mirostat 2 is refused by name', async () => {
    const ol = new Ollama({ host: daemon.base });
    const options = { numa: false, num_ctx: 2048, num_batch: 512, num_gpu: -1, main_gpu: 0, low_vram: false, f16_kv: true, logits_all: false, vocab_only: false, use_mmap: true, use_mlock: false, embedding_only: false, num_thread: 0, num_keep: 4, seed: 1, num_predict: 4, top_k: 40, top_p: 0.9, min_p: 0, tfs_z: 1, typical_p: 1, repeat_last_n: 64, temperature: 0.8, repeat_penalty: 1.1, presence_penalty: 0, frequency_penalty: 0, mirostat: 0, mirostat_tau: 5, mirostat_eta: 0.1, penalize_newline: true, stop: [] };
    const r = await ol.chat({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], options });
    expect(r.done).toBe(true);
    await expect(ol.chat({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], options: { mirostat: 2 } })).rejects.toThrow(/options\.mirostat/);
  }, 60_000);

  it('anthropic: thinking on a template without reasoning is a 400 that says so; disabled is accepted', async () => {
    const an = new Anthropic({ baseURL: daemon.base, apiKey: 'unused', maxRetries: 0 });
    await expect(an.messages.create({ model: MODEL, max_tokens: 8, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'hi' }] })).rejects.toThrow(/does not support thinking/);
    const ok = await an.messages.create({ model: MODEL, max_tokens: 4, thinking: { type: 'disabled' }, messages: [{ role: 'user', content: 'hi' }] });
    expect(ok.type).toBe('message');
  }, 60_000);
});

describe('ollama', () => {
  const client = () => new Ollama({ host: daemon.base });

  it('lists, shows, chats (stream and not)', async () => {
    const ol = client();
    expect((await ol.list()).models.map((m) => m.name)).toContain(MODEL);
    const show = await ol.show({ model: MODEL });
    expect(show.template).toContain('<tool_call>');
    const r = await ol.chat({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], options: { num_predict: 5, seed: 1 } });
    expect(r.done).toBe(true);
    expect(r.message.role).toBe('assistant');
    let pieces = 0;
    let last: { done: boolean; eval_count?: number } | null = null;
    for await (const part of await ol.chat({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream: true, options: { num_predict: 5, seed: 2 } })) {
      pieces++;
      last = part;
    }
    expect(pieces).toBeGreaterThan(1);
    expect(last?.done).toBe(true);
  }, 120_000);

  it('tool calls come back with object arguments', async () => {
    const r = await client().chat({ model: MODEL, messages: [{ role: 'user', content: 'Weather?' }], tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: weatherParams as never } }], options: { num_predict: 250, seed: 3 } });
    expect(r.done).toBe(true);
    for (const c of r.message.tool_calls ?? []) expect(typeof c.function.arguments).toBe('object');
  }, 60_000);

  it('pulls from the (mock) hub with progress, then lists the model', async () => {
    const ol = client();
    const statuses: string[] = [];
    for await (const p of await ol.pull({ model: PULLED, stream: true })) statuses.push(p.status);
    expect(statuses[0]).toBe('pulling manifest');
    expect(statuses.at(-1)).toBe('success');
    expect(statuses.some((s) => s.startsWith('pulling ') && s !== 'pulling manifest')).toBe(true);
    expect((await ol.list()).models.map((m) => m.name)).toContain(PULLED);
  }, 120_000);
});

describe('embeddings', () => {
  const oa = () => new OpenAI({ baseURL: `${daemon.base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
  /** The engine's own embedding of `text`, in this process: what the daemon must answer. */
  async function expected(text: string): Promise<Float32Array> {
    const config = loadModelConfig(embedDir);
    const shard = loadShard(embedDir, { layers: [0, config.numLayers], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend: createReferenceBackend() });
    return embedTokens(shard, loadTokenizer(embedDir).encode(text), readEmbeddingConfig(embedDir));
  }
  const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => Math.max(...Array.from(a, (x, i) => Math.abs(x - b[i])));

  it('openai: a batch (base64, the SDK default) and single inputs (float) equal the engine’s pooled, normalised vectors; dimensions shortens', async () => {
    const batch = await oa().embeddings.create({ model: EMBED, input: ['pears in the orchard', 'a quiet river'] });
    expect(batch.data.map((d) => d.index)).toEqual([0, 1]);
    expect(batch.usage.prompt_tokens).toBeGreaterThan(4);
    const [a, b] = batch.data.map((d) => d.embedding);
    expect(maxDiff(a, await expected('pears in the orchard'))).toBeLessThan(1e-3);
    expect(maxDiff(b, await expected('a quiet river'))).toBeLessThan(1e-3);
    expect(Math.hypot(...a)).toBeCloseTo(1, 4);
    const single = await oa().embeddings.create({ model: EMBED, input: 'a quiet river', encoding_format: 'float' });
    expect(maxDiff(single.data[0].embedding, b)).toBeLessThan(1e-6);
    const short = await oa().embeddings.create({ model: EMBED, input: 'a quiet river', dimensions: 8, encoding_format: 'float' });
    expect(short.data[0].embedding).toHaveLength(8);
    expect(Math.hypot(...short.data[0].embedding)).toBeCloseTo(1, 4);
    await expect(oa().embeddings.create({ model: EMBED, input: '' })).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/input\[0\]: an empty string/) });
    await expect(oa().embeddings.create({ model: 'test-org/absent', input: 'x' })).rejects.toMatchObject({ status: 404 });
    await expect(oa().embeddings.create({ model: EMBED, input: [[1, 2, 1_000_000]] })).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/input\[0\]: token id 1000000 is outside the vocabulary/) });
  }, 180_000);

  it('ollama: embed equals the openai answer; an input past the limit is cut, or refused with truncate: false', async () => {
    const ol = new Ollama({ host: daemon.base });
    const r = await ol.embed({ model: EMBED, input: ['pears in the orchard', 'a quiet river'] });
    expect(r.embeddings).toHaveLength(2);
    const ref = await oa().embeddings.create({ model: EMBED, input: 'pears in the orchard', encoding_format: 'float' });
    expect(maxDiff(r.embeddings[0], ref.data[0].embedding)).toBeLessThan(1e-6);
    const legacy = await ol.embeddings({ model: EMBED, prompt: 'a quiet river' });
    expect(maxDiff(legacy.embedding, r.embeddings[1])).toBeLessThan(1e-6);
    const long = 'orchard '.repeat(5000);
    expect((await ol.embed({ model: EMBED, input: long })).embeddings[0].length).toBe(r.embeddings[0].length);
    await expect(ol.embed({ model: EMBED, input: long, truncate: false })).rejects.toThrow(/input\[0\] is \d+ tokens; this model embeds at most \d+/);
  }, 180_000);
});

describe('integrations: each client\'s request sequence (test/dialects/recorded)', () => {
  const dir = join(import.meta.dirname, 'recorded');
  type Step = { method: string; path: string; headers?: Record<string, string>; body?: unknown; expect: 'json' | 'sse-openai' | 'sse-anthropic' | 'sse-responses' | 'ndjson' };
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

  it('covers every client docs/integrations.md names', () => {
    expect(files.sort()).toEqual(['claude-code.json', 'codex-cli.json', 'continue.json', 'open-webui-ollama.json', 'open-webui-openai.json', 'openai-sdk.json', 'zed.json']);
  });

  it.each(files)('%s', async (file) => {
    const seq = JSON.parse(readFileSync(join(dir, file), 'utf8').split('$MODEL').join(MODEL)) as { steps: Step[] };
    for (const step of seq.steps) {
      const r = await fetch(daemon.base + step.path, { method: step.method, headers: { ...(step.body ? { 'content-type': 'application/json' } : {}), ...step.headers }, body: step.body ? JSON.stringify(step.body) : undefined });
      const text = await r.text();
      const where = `${file}: ${step.method} ${step.path}`;
      expect(r.status, `${where}: ${text.slice(0, 300)}`).toBe(200);
      if (step.expect === 'json') JSON.parse(text);
      else if (step.expect === 'ndjson') {
        const lines = text.trim().split('\n').map((l) => JSON.parse(l));
        expect(lines.at(-1).done, where).toBe(true);
      } else if (step.expect === 'sse-openai') {
        const data = text.split('\n\n').filter((b) => b.startsWith('data: ')).map((b) => b.slice(6));
        expect(data.at(-1), where).toBe('[DONE]');
        for (const d of data.slice(0, -1)) expect(JSON.parse(d).object, where).toBe('chat.completion.chunk');
      } else {
        const events = [...text.matchAll(/^event: ([\w.]+)$/gm)].map((m) => m[1]);
        if (step.expect === 'sse-anthropic') expect([events[0], events.at(-1)], where).toEqual(['message_start', 'message_stop']);
        else {
          expect(events[0], where).toBe('response.created');
          expect(['response.completed', 'response.incomplete'], where).toContain(events.at(-1));
        }
      }
    }
  }, 120_000);
});
