/**
 * A serving daemon with a random Qwen-2.5-format model (its published template and special tokens):
 * OpenAI chat with tools (required, named, auto, tool results fed back), streaming tool_calls deltas,
 * response_format json_schema, logprobs, and the 400s for what cannot be served — over HTTP, through
 * the executor and a runner process.
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Daemon } from '../../src/daemon.js';
import { familyModelOptions } from '../../../engine/test/fixtures/chat-templates/families.js';
import { api, startServingDaemon } from '../serve/in-process-pod.js';

const MODEL = 'test-org/qwen-tools';
let daemon: Daemon;
let dataDir: string;

beforeAll(async () => {
  ({ daemon, dataDir } = await startServingDaemon({ tmpPrefix: 'orchard-serve-tools-', bootstrap: [], model: { repo: MODEL, options: familyModelOptions('qwen25', { seed: 7 }) } }));
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
});
