/**
 * A serving daemon with a random Qwen-2.5-format model (its published template and special tokens):
 * OpenAI chat with tools (required, named, auto, tool results fed back), streaming tool_calls deltas,
 * response_format json_schema, logprobs, and the 400s for what cannot be served — over HTTP, through
 * the executor and a runner process.
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Orchard } from '../../src/orchard.js';
import { familyModelOptions } from '../../../engine/test/fixtures/chat-templates/families.js';
import { api, startServingDaemon, waitFor } from '../serve/in-process-pod.js';

const MODEL = 'test-org/qwen-tools';
let daemon: Orchard;
let dataDir: string;

beforeAll(async () => {
  ({ daemon, dataDir } = await startServingDaemon({ tmpPrefix: 'orchard-serve-tools-', bootstrap: [], model: { repo: MODEL, options: familyModelOptions('qwen25', { seed: 7 }) } }));
  // Placement needs this node's profile in the cluster state.
  await waitFor('the node with its profile', () => daemon.daemon.cluster().nodes.length === 1 || undefined, 30_000, 100);
}, 60_000);
afterAll(async () => {
  await daemon?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const weather = { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'], additionalProperties: false } } };
const post = async (body: Record<string, unknown>) => {
  const r = await api(daemon, '/v1/chat/completions', { method: 'POST', body: JSON.stringify({ model: MODEL, max_tokens: 120, temperature: 1, ...body }) });
  return { status: r.status, body: (await (r.headers.get('content-type')?.includes('json') ? r.json() : r.text())) as any };
};

describe('OpenAI chat with tools on a served model', () => {
  it('tool_choice required: a tool call comes back, then the result goes back through the template', async () => {
    const r = await post({ messages: [{ role: 'user', content: 'Weather in Paris?' }], tools: [weather], tool_choice: 'required', parallel_tool_calls: false, seed: 1 });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const choice = r.body.choices[0];
    expect(choice.finish_reason).toBe('tool_calls');
    const call = choice.message.tool_calls[0];
    expect(call.type).toBe('function');
    expect(call.function.name).toBe('get_weather');
    expect(Object.keys(JSON.parse(call.function.arguments))).toEqual(['city']);
    expect(call.id).toMatch(/^call_/);
    const next = await post({
      messages: [{ role: 'user', content: 'Weather in Paris?' }, choice.message, { role: 'tool', tool_call_id: call.id, content: 'sunny' }],
      tools: [weather],
      seed: 2,
      max_tokens: 8,
    });
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(['stop', 'length', 'tool_calls']).toContain(next.body.choices[0].finish_reason);
    expect(next.body.usage.prompt_tokens).toBeGreaterThan(r.body.usage.prompt_tokens);
  }, 60_000);

  it('streams a call as OpenAI does: id, type and name first, then the arguments', async () => {
    const r = await post({ messages: [{ role: 'user', content: 'Weather?' }], tools: [weather], tool_choice: { type: 'function', function: { name: 'get_weather' } }, stream: true, seed: 3 });
    expect(r.status).toBe(200);
    const chunks = (r.body as string).split('\n\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)));
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
    expect(deltas[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'get_weather', arguments: '' } });
    expect(deltas[0].id).toMatch(/^call_/);
    const args = deltas.map((d: any) => d.function?.arguments ?? '').join('');
    expect(JSON.parse(args).city).toBeTypeOf('string');
    expect(chunks.at(-1).choices[0].finish_reason).toBe('tool_calls');
  }, 60_000);

  it('response_format json_schema: the content parses and matches', async () => {
    const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['ok', 'n'], additionalProperties: false };
    for (const seed of [1, 2, 3]) {
      const r = await post({ messages: [{ role: 'user', content: 'JSON please' }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema, strict: true } }, seed });
      expect(r.status).toBe(200);
      const v = JSON.parse(r.body.choices[0].message.content);
      expect(typeof v.ok).toBe('boolean');
      expect(v.n).toBeGreaterThanOrEqual(0);
      expect(v.n).toBeLessThanOrEqual(9);
    }
  }, 60_000);

  it('logprobs with top_logprobs', async () => {
    const r = await post({ messages: [{ role: 'user', content: 'hi' }], logprobs: true, top_logprobs: 2, max_tokens: 5, seed: 4 });
    expect(r.status).toBe(200);
    const lp = r.body.choices[0].logprobs.content;
    expect(lp.length).toBeGreaterThan(0);
    for (const t of lp) {
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(t.top_logprobs).toHaveLength(2);
      expect(t.bytes).toEqual([...Buffer.from(t.token, 'utf8')]);
    }
  }, 60_000);

  it('what cannot be served is a 400 naming the field', async () => {
    const image = await post({ messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this' }, { type: 'image_url', image_url: { url: 'data:,' } }] }] });
    expect(image.status).toBe(400);
    expect(image.body.error.param).toBe('messages[0].content[1]');
    expect(image.body.error.message).toMatch(/'image_url' content parts are not supported/);
    const n = await post({ messages: [{ role: 'user', content: 'hi' }], n: 2 });
    expect(n.status).toBe(400);
    expect(n.body.error.message).toMatch(/^n: only n = 1 is supported/);
    const badTool = await post({ messages: [{ role: 'user', content: 'hi' }], tools: [weather], tool_choice: { type: 'function', function: { name: 'nope' } } });
    expect(badTool.status).toBe(400);
    expect(badTool.body.error.message).toMatch(/tool_choice names 'nope'/);
  }, 60_000);

  it("speculate: 'prompt-lookup' (Orchard's field) answers what plain decode answers; 'draft' or 'mtp' without one and another value are 400s", async () => {
    const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['ok', 'n'], additionalProperties: false };
    const body = { messages: [{ role: 'user', content: 'JSON please: {"ok": true, "n": 1} {"ok": true, "n": 1}' }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema, strict: true } }, seed: 5 };
    const plain = await post(body);
    const spec = await post({ ...body, speculate: 'prompt-lookup' });
    expect(spec.status, JSON.stringify(spec.body)).toBe(200);
    expect(spec.body.choices[0].message.content).toBe(plain.body.choices[0].message.content);
    // the same counts; the second request's prompt came from the prefix cache the first left (whole 16-token blocks)
    const { prompt_tokens_details: cached, ...counts } = spec.body.usage;
    expect(counts).toEqual({ prompt_tokens: plain.body.usage.prompt_tokens, completion_tokens: plain.body.usage.completion_tokens, total_tokens: plain.body.usage.total_tokens });
    expect(cached.cached_tokens).toBe(16 * Math.floor((plain.body.usage.prompt_tokens - 1) / 16));
    const bad = await post({ ...body, speculate: 'ngram' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe('speculate');
    // 'draft' is a mode the API takes; this daemon has no --draft-model, so the request is refused, not the instance.
    const noDraft = await post({ ...body, speculate: 'draft' });
    expect(noDraft.status, JSON.stringify(noDraft.body)).toBe(400);
    expect(noDraft.body.error.message).toMatch(/no draft model/);
    // 'mtp' likewise: this checkpoint has no multi-token-prediction layer and the instance was not started with --speculate mtp.
    const noMtp = await post({ ...body, speculate: 'mtp' });
    expect(noMtp.status, JSON.stringify(noMtp.body)).toBe(400);
    expect(noMtp.body.error.message).toMatch(/no multi-token-prediction layer/);
    expect((await post(body)).status).toBe(200);
  }, 60_000);
});

const postJson = async (path: string, body: Record<string, unknown>, headers: Record<string, string> = {}) => {
  const r = await fetch(`http://127.0.0.1:${daemon.apiPort}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, text, json: () => JSON.parse(text) };
};

describe('Anthropic Messages on the same model', () => {
  const tools = [{ name: 'get_weather', description: 'Weather in a city', input_schema: weather.function.parameters }];

  it('a forced tool_use, then the tool_result turn is accepted', async () => {
    const r = await postJson('/v1/messages', { model: MODEL, max_tokens: 120, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, tool_choice: { type: 'tool', name: 'get_weather' } });
    expect(r.status, r.text).toBe(200);
    const m = r.json();
    expect(m).toMatchObject({ type: 'message', role: 'assistant', model: MODEL, stop_reason: 'tool_use' });
    const use = m.content.find((b: any) => b.type === 'tool_use');
    expect(use.name).toBe('get_weather');
    expect(typeof use.input.city).toBe('string');
    const next = await postJson('/v1/messages', {
      model: MODEL,
      max_tokens: 5,
      system: 'Be brief.',
      messages: [{ role: 'user', content: 'Weather in Paris?' }, { role: 'assistant', content: m.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] }],
      tools,
    });
    expect(next.status, next.text).toBe(200);
    expect(next.json().usage.input_tokens).toBeGreaterThan(m.usage.input_tokens);
  }, 60_000);

  it('streams the event sequence Anthropic clients expect', async () => {
    const r = await postJson('/v1/messages', { model: MODEL, max_tokens: 6, stream: true, messages: [{ role: 'user', content: 'Hi' }] });
    expect(r.status).toBe(200);
    const events = [...r.text.matchAll(/^event: (\w+)$/gm)].map((x) => x[1]);
    expect(events.slice(0, 2)).toEqual(['message_start', 'ping']);
    expect(events.slice(-2)).toEqual(['message_delta', 'message_stop']);
    if (events.includes('content_block_delta')) expect(events.indexOf('content_block_start')).toBeLessThan(events.indexOf('content_block_delta'));
  }, 60_000);

  it('count_tokens and the Anthropic error shape', async () => {
    const c = await postJson('/v1/messages/count_tokens', { model: MODEL, messages: [{ role: 'user', content: 'Hello there' }] });
    expect(c.status, c.text).toBe(200);
    expect(c.json().input_tokens).toBeGreaterThan(5);
    const bad = await postJson('/v1/messages', { model: MODEL, messages: [{ role: 'user', content: 'x' }] });
    expect(bad.status).toBe(400);
    expect(bad.json()).toMatchObject({ type: 'error', error: { type: 'invalid_request_error' } });
    expect(bad.json().error.message).toMatch(/^max_tokens: /);
    const img = await postJson('/v1/messages', { model: MODEL, max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] });
    expect(img.status).toBe(400);
    expect(img.json().error.message).toMatch(/messages\[0\]\.content\[0\]: 'image' blocks are not supported/);
  }, 60_000);
});

describe('the same conversation counts the same tokens in every dialect', () => {
  it('OpenAI, Anthropic (and its count_tokens), Ollama and Responses bill one prompt; /apply-template shows it', async () => {
    const w = weather.function;
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather in Paris?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
    ];
    const openai = await postJson('/v1/chat/completions', { model: MODEL, max_tokens: 1, tools: [weather], messages });
    expect(openai.status, openai.text).toBe(200);
    const anthropicBody = {
      model: MODEL,
      max_tokens: 1,
      system: 'Be brief.',
      tools: [{ name: w.name, description: w.description, input_schema: w.parameters }],
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'sunny' }] },
      ],
    };
    const anthropic = await postJson('/v1/messages', anthropicBody);
    expect(anthropic.status, anthropic.text).toBe(200);
    const counted = await postJson('/v1/messages/count_tokens', anthropicBody);
    const ollama = await postJson('/api/chat', {
      model: MODEL,
      stream: false,
      tools: [weather],
      options: { num_predict: 1 },
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: '', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Paris' } } }] },
        { role: 'tool', content: 'sunny' },
      ],
    });
    expect(ollama.status, ollama.text).toBe(200);
    const responses = await postJson('/v1/responses', {
      model: MODEL,
      max_output_tokens: 1,
      instructions: 'Be brief.',
      tools: [{ type: 'function', name: w.name, description: w.description, parameters: w.parameters }],
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city": "Paris"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
      ],
    });
    expect(responses.status, responses.text).toBe(200);
    const n = openai.json().usage.prompt_tokens;
    expect(n).toBeGreaterThan(20);
    expect({ anthropic: anthropic.json().usage.input_tokens, count_tokens: counted.json().input_tokens, ollama: ollama.json().prompt_eval_count, responses: responses.json().usage.input_tokens }).toEqual({ anthropic: n, count_tokens: n, ollama: n, responses: n });
    // What the model sees for the OpenAI body, without generating: the same count, the template's text.
    const shown = await postJson('/apply-template', { model: MODEL, tools: [weather], messages });
    expect(shown.status, shown.text).toBe(200);
    expect(shown.json()).toMatchObject({ model: MODEL, token_count: n, tool_call_format: 'hermes' });
    expect(shown.json().tokens).toHaveLength(n);
    expect(shown.json().prompt).toMatch(/^<\|im_start\|>system\nBe brief\./);
    expect(shown.json().prompt).toContain('<tool_response>\nsunny\n</tool_response>');
    expect((await postJson('/apply-template', { model: 'nope', messages: [{ role: 'user', content: 'x' }] })).status).toBe(404);
  }, 60_000);
});

describe('Ollama API on the same model', () => {
  it('tags, show, version, ps', async () => {
    const tags = (await (await fetch(`http://127.0.0.1:${daemon.apiPort}/api/tags`)).json()) as any;
    expect(tags.models.map((m: any) => m.name)).toContain(MODEL);
    const show = await postJson('/api/show', { model: `${MODEL}:latest` });
    expect(show.status).toBe(200);
    expect(show.json().capabilities).toEqual(['completion', 'tools']);
    expect(show.json().template).toContain('<tool_call>');
    expect(((await (await fetch(`http://127.0.0.1:${daemon.apiPort}/api/version`)).json()) as any).version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(((await (await fetch(`http://127.0.0.1:${daemon.apiPort}/api/ps`)).json()) as any).models).toBeInstanceOf(Array);
  });

  it('chat streams NDJSON ending in a done line; format as a schema constrains the content', async () => {
    const s = await postJson('/api/chat', { model: MODEL, messages: [{ role: 'user', content: 'hi' }], options: { num_predict: 6, seed: 1 } });
    expect(s.status).toBe(200);
    const lines = s.text.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.at(-1)).toMatchObject({ model: MODEL, done: true, prompt_eval_count: expect.any(Number), eval_count: expect.any(Number) });
    expect(lines.slice(0, -1).every((l) => l.done === false && l.message.role === 'assistant')).toBe(true);
    // the same chat again: Ollama's count of prompt tokens read from the cache, the whole prompt still counted
    const again = await postJson('/api/chat', { model: MODEL, stream: false, messages: [{ role: 'user', content: 'hi' }], options: { num_predict: 2, seed: 1 } });
    const first = lines.at(-1);
    expect(again.json()).toMatchObject({ prompt_eval_count: first.prompt_eval_count, prompt_eval_cached_count: 16 * Math.floor((first.prompt_eval_count - 1) / 16) });
    const j = await postJson('/api/chat', { model: MODEL, stream: false, messages: [{ role: 'user', content: 'json' }], format: { type: 'object', properties: { a: { type: 'boolean' } }, required: ['a'] }, options: { num_predict: 40, seed: 2 } });
    expect(j.status, j.text).toBe(200);
    expect(typeof JSON.parse(j.json().message.content).a).toBe('boolean');
  }, 60_000);

  it('tool calls come back with object arguments; errors are {"error": ...}', async () => {
    const r = await postJson('/api/chat', { model: MODEL, stream: false, messages: [{ role: 'user', content: 'Weather?' }], tools: [weather], options: { num_predict: 80, seed: 3 } });
    expect(r.status, r.text).toBe(200);
    const missing = await postJson('/api/chat', { model: 'nope', messages: [] });
    expect(missing.status).toBe(404);
    expect(missing.json()).toEqual({ error: "model 'nope' not found" });
    // Ollama's penalties are honoured; a sampler Orchard does not implement is a 400 naming it.
    const pen = await postJson('/api/generate', { model: MODEL, prompt: 'x', stream: false, options: { repeat_penalty: 1.1, repeat_last_n: 64, num_predict: 2 } });
    expect(pen.status, pen.text).toBe(200);
    const miro = await postJson('/api/generate', { model: MODEL, prompt: 'x', options: { mirostat: 2 } });
    expect(miro.status).toBe(400);
    expect(miro.json().error).toMatch(/^options\.mirostat: mirostat 2 sampling is not implemented/);
  }, 60_000);

  // Last: it unloads the model.
  it('keep_alive per request: a duration keeps the model loaded that long, 0 unloads it once done, a bad value is a 400 naming it', async () => {
    const instances = () => Object.values(daemon.daemon.replica.state.instances).filter((i) => i.model === MODEL);
    const bad = await postJson('/api/chat', { model: MODEL, messages: [{ role: 'user', content: 'hi' }], keep_alive: 'soon' });
    expect(bad.status).toBe(400);
    expect(bad.json().error).toMatch(/^keep_alive: keep_alive must be a duration/);
    // 3 s (the daemon's own keep-alive is 30 minutes): loaded a while after the request, then unloaded.
    const kept = await postJson('/api/chat', { model: MODEL, stream: false, keep_alive: '3s', messages: [{ role: 'user', content: 'hi' }], options: { num_predict: 2, seed: 1 } });
    expect(kept.status, kept.text).toBe(200);
    const done = Date.now();
    await new Promise((r) => setTimeout(r, 1_500));
    expect(instances()).toHaveLength(1);
    await waitFor('the model unloaded 3 s after its request', () => (instances().length === 0 ? true : undefined), 20_000, 100);
    expect(Date.now() - done).toBeGreaterThanOrEqual(2_900);
    const once = await postJson('/api/chat', { model: MODEL, stream: false, keep_alive: 0, messages: [{ role: 'user', content: 'hi' }], options: { num_predict: 2, seed: 1 } });
    expect(once.status, once.text).toBe(200);
    await waitFor('the model unloaded after its keep_alive 0 request', () => (instances().length === 0 ? true : undefined), 20_000, 100);
    // Ollama's way to unload without generating: an empty prompt with keep_alive 0.
    expect((await postJson('/api/generate', { model: MODEL, keep_alive: 0 })).json()).toMatchObject({ done: true, done_reason: 'unload' });
  }, 60_000);
});
