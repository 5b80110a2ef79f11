/**
 * Tool calling through the published chat templates of real model families (engine test fixtures):
 * each template's own rendering of a call is read back by the format's parser, and random-weight
 * models with each family's template and special tokens, constrained by the format's grammar
 * (tool_choice required / named), write calls the parser reads with arguments matching the schema.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ChatTemplate, generate, loadInProcessModel, loadTokenizer, type ChatMessage, type ToolDefinition } from '@orchard/engine';
import { coalesce, type ReplyEvent, type ReplyParser } from '../../src/requests/reply.js';
import { detectToolCallFormat } from '../../src/prompt/tools/registry.js';
import { DialectError } from '../../src/requests/errors.js';
import { callsIntoContent, planChat } from '../../src/prompt/tools/plan.js';
import { thinkingMarkers, withThinking } from '../../src/prompt/tools/thinking.js';
import { templateReply } from './template-reply.js';
import { FAMILIES, familyModelOptions, familyTemplate, writeFamilyModel, type FamilyName } from '../../../engine/test/fixtures/chat-templates/families.js';
import { writeRandomModel } from '@orchard/engine/testing';
const tmp = { dir: mkdtempSync(join(tmpdir(), 'orchard-tool-calls-')) };
afterAll(() => rmSync(tmp.dir, { recursive: true, force: true }));

const weather: ToolDefinition = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', description: 'City', maxLength: 12 }, days: { type: 'integer', description: 'Days', minimum: 1, maximum: 5 } }, required: ['city', 'days'], additionalProperties: false },
  },
};
const time: ToolDefinition = {
  type: 'function',
  function: { name: 'get_time', description: 'Local time in a city', parameters: { type: 'object', properties: { zone: { type: 'string', description: 'Zone', enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false } },
};
const tools = [weather, time];

const EXPECTED: Record<FamilyName, string | null> = {
  qwen25: 'hermes',
  qwen3: 'hermes',
  hermes3: 'hermes',
  llama31: 'llama3-json',
  llama32: 'llama3-json',
  mistral: 'mistral',
  deepseekV31: 'deepseek-v3.1',
  deepseekR1: 'deepseek-v3',
  kimiK2: 'kimi-k2',
  gptOss: 'harmony',
  qwen3Coder: 'qwen3-coder',
  glm46: 'glm-4.5',
  seedOss: 'seed-oss',
  commandR: 'command-r',
  granite: 'granite',
  functionaryV31: 'functionary-v3.1',
  functionaryV32: 'functionary-v3.2',
  gemma2: null,
};
const families = (Object.keys(EXPECTED) as FamilyName[]).filter((f) => EXPECTED[f]);
/** Templates that render only one call per assistant message. */
const singleCall = new Set<FamilyName>(['llama31', 'llama32', 'gptOss']);
/** Formats that force one call even when parallel calls are allowed (their prompt asks for one at a time). */
const oneForced = new Set<FamilyName>(['functionaryV31']);

/** Feeds text in uneven pieces (1-7 characters), as tokens arrive. */
function feed(p: ReplyParser, text: string): ReplyEvent[] {
  const out: ReplyEvent[] = [];
  for (let i = 0, n = 1; i < text.length; i += n, n = (n % 7) + 1) out.push(...p.push(text.slice(i, i + n)));
  out.push(...p.end());
  return coalesce(out);
}


describe('formats are found from the template text', () => {
  it.each(Object.keys(EXPECTED) as FamilyName[])('%s', (f) => {
    expect(detectToolCallFormat(familyTemplate(f))?.name ?? null).toBe(EXPECTED[f]);
  });
});

describe("each template's own rendering of calls reads back", () => {
  it.each(families)('%s', (f) => {
    const t = new ChatTemplate(familyTemplate(f), { bos_token: '<s>', eos_token: FAMILIES[f].eos });
    const calls = [
      { id: 'abcdefghi', type: 'function' as const, function: { name: 'get_weather', arguments: '{"city": "Paris", "days": 2}' } },
      { id: 'jklmnopqr', type: 'function' as const, function: { name: 'get_time', arguments: '{"zone": "CET"}' } },
    ].slice(0, singleCall.has(f) ? 1 : 2);
    const user: ChatMessage = { role: 'user', content: 'Weather and time in Paris?' };
    const p1 = t.render([user], { tools });
    const format = detectToolCallFormat(t.source)!;
    // Granite's template never writes calls: they go in the content, as planChat sends them.
    const history: ChatMessage[] = [user, { role: 'assistant', content: null, tool_calls: calls }];
    const p2 = t.render(t.caps.toolCalls ? history : callsIntoContent(format, history), { tools, addGenerationPrompt: false });
    const reply = templateReply(f, p1, p2);
    const parser = format.parser((i) => `id${i}`);
    const think = thinkingMarkers(t.source);
    const events = feed(think ? withThinking(parser, false, think) : parser, reply);
    const got = events.filter((e) => e.type === 'tool_call').map((e) => (e.type === 'tool_call' ? [e.call.name, JSON.parse(e.call.arguments)] : null));
    expect(got, reply).toEqual(calls.map((c) => [c.function.name, JSON.parse(c.function.arguments)]));
    expect(events.filter((e) => e.type !== 'tool_call').map((e) => (e as { text: string }).text.trim()).join(''), reply).toBe('');
  });
});

describe('random models with each family template, tool_choice required and named', () => {
  it.each(families)('%s', async (f) => {
    const info = writeFamilyModel(join(tmp.dir, f), f, { seed: 5 });
    const tok = loadTokenizer(info.dir);
    const model = loadInProcessModel(info.dir);
    const eos = new Set(model.config.eosTokenIds);
    const run = async (choice: 'required' | { name: string }, seed: number, parallel = false) => {
      const plan = planChat(tok, f, { messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, toolChoice: choice, parallelToolCalls: parallel });
      expect(plan.constraint).not.toBeNull();
      // Parallel: a random model keeps adding calls with odds near one half each time; leave room.
      const r = await generate(model, tok.encode(plan.prompt, { addSpecialTokens: false }), { tokenizer: tok, temperature: 1, seed, maxTokens: parallel ? 1500 : 300, constraint: plan.constraint! });
      const text = tok.decode(r.tokens.filter((t) => !eos.has(t)), { skipSpecialTokens: false });
      expect(r.finishReason, text).toBe('stop');
      const events = feed(plan.parser(), text);
      if (!events.some((e) => e.type === 'tool_call')) throw new Error(`no call in ${JSON.stringify(text)}: ${JSON.stringify(events)}`);
      return events.filter((e) => e.type === 'tool_call').map((e) => (e as Extract<ReplyEvent, { type: 'tool_call' }>).call);
    };
    for (const [seed, parallel] of [[1, false], [2, true]] as const) {
      const calls = await run('required', seed, parallel);
      expect(calls.length, JSON.stringify(calls)).toBeGreaterThanOrEqual(1);
      if (!parallel || oneForced.has(f)) expect(calls).toHaveLength(1);
      for (const c of calls) {
        const args = JSON.parse(c.arguments);
        if (c.name === 'get_weather') {
          expect(Object.keys(args).sort()).toEqual(['city', 'days']);
          expect([...args.city].length).toBeLessThanOrEqual(12);
          expect(args.days).toBeGreaterThanOrEqual(1);
          expect(args.days).toBeLessThanOrEqual(5);
        } else {
          expect(c.name).toBe('get_time');
          expect(['UTC', 'CET']).toContain(args.zone);
        }
        expect(c.id).toBeTruthy();
      }
    }
    const named = await run({ name: 'get_time' }, 3);
    expect(named.map((c) => c.name)).toEqual(['get_time']);
  });
});

describe('conversations with tool results', () => {
  it('feeds calls and results back through the template (ids the template cannot take are mapped consistently)', () => {
    for (const f of ['qwen25', 'mistral', 'kimiK2', 'deepseekV31'] as const) {
      const info = writeFamilyModel(join(tmp.dir, `hist-${f}`), f);
      const tok = loadTokenizer(info.dir);
      const messages: ChatMessage[] = [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_9f2b1c0d7e', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":1}' } }] },
        { role: 'tool', tool_call_id: 'call_9f2b1c0d7e', name: 'get_weather', content: 'sunny, 21 C' },
      ];
      const plan = planChat(tok, f, { messages, tools });
      expect(plan.prompt).toContain('sunny, 21 C');
      expect(plan.prompt).toMatch(/"city":\s*"Paris"/);
      if (f === 'mistral') expect(plan.prompt).toMatch(/"id": "[a-zA-Z0-9]{9}"\}\]<\/s>\[TOOL_RESULTS\]\{"content": sunny, 21 C, "call_id": "[a-zA-Z0-9]{9}"\}/);
    }
  });

  it('Llama 3.1: brave_search and wolfram_alpha among the tools are its built-ins (ipython mode), the others JSON functions', () => {
    const llama = loadTokenizer(writeFamilyModel(join(tmp.dir, 'llama-builtin'), 'llama31').dir);
    const search: ToolDefinition = { type: 'function', function: { name: 'brave_search', description: 'Web search', parameters: { type: 'object', properties: { query: { type: 'string' } } } } };
    const plan = planChat(llama, 'llama', { messages: [{ role: 'user', content: 'hi' }], tools: [search, weather] });
    expect(plan.prompt).toContain('Environment: ipython\nTools: brave_search\n');
    expect(plan.prompt).toContain('"name": "get_weather"');
    expect(plan.prompt).not.toContain('"name": "brave_search"');
  });

  it('tells a template that never describes tools (DeepSeek V3.1) about them as its model card does', () => {
    const info = writeFamilyModel(join(tmp.dir, 'ds-sys'), 'deepseekV31');
    const plan = planChat(loadTokenizer(info.dir), 'ds', { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }], tools: [time] });
    // The layout and words of DeepSeek-V3.1's model card: {system prompt}\n\n{tool_description}<｜User｜>{query}<｜Assistant｜></think>
    const card = [
      'Be brief.\n\n## Tools\nYou have access to the following tools:\n\n',
      '### get_time\nDescription: Local time in a city\n\n',
      'Parameters: {"type": "object", "properties": {"zone": {"type": "string", "description": "Zone", "enum": ["UTC", "CET"]}}, "required": ["zone"], "additionalProperties": false}\n\n',
      'IMPORTANT: ALWAYS adhere to this exact format for tool use:\n',
      '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool_call_name<｜tool▁sep｜>tool_call_arguments<｜tool▁call▁end｜>{additional_tool_calls}<｜tool▁calls▁end｜>\n\n',
      'Where:\n- `tool_call_name` must be an exact match to one of the available tools\n',
      "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n",
      '- For multiple tool calls, chain them directly without separators or spaces<｜User｜>hi<｜Assistant｜></think>',
    ].join('');
    expect(plan.prompt).toBe(`<｜begin▁of▁sentence｜>${card}`);
    // No system prompt: the card's layout starts with the blank line.
    const bare = planChat(loadTokenizer(info.dir), 'ds', { messages: [{ role: 'user', content: 'hi' }], tools: [time] });
    expect(bare.prompt.startsWith('<｜begin▁of▁sentence｜>\n\n## Tools\n')).toBe(true);
    expect(bare.prompt).not.toContain('You can call the following functions');
  });
});

describe('what cannot be served is a 400 naming it', () => {
  const gemma = loadTokenizer(writeFamilyModel(join(tmp.dir, 'gemma'), 'gemma2').dir);
  const qwen = loadTokenizer(writeFamilyModel(join(tmp.dir, 'qwen-err'), 'qwen25').dir);
  const user: ChatMessage[] = [{ role: 'user', content: 'hi' }];

  it('tools for a model whose template has no tool support', () => {
    const err = (() => {
      try {
        planChat(gemma, 'gemma-it', { messages: user, tools });
      } catch (e) {
        return e as DialectError;
      }
    })();
    expect(err).toBeInstanceOf(DialectError);
    expect(err!.message).toMatch(/the model 'gemma-it' does not support tools: its chat template never writes tool calls/);
    expect(err!.param).toBe('tools');
    expect(err!.code).toBe('tools_unsupported');
  });

  it('tool results sent to such a model, an unknown named tool, required without tools', () => {
    expect(() => planChat(gemma, 'g', { messages: [...user, { role: 'tool', tool_call_id: 'x', content: 'r' }] })).toThrow(/does not support tools/);
    expect(() => planChat(qwen, 'q', { messages: user, tools, toolChoice: { name: 'nope' } })).toThrow(/tool_choice names 'nope'/);
    expect(() => planChat(qwen, 'q', { messages: user, toolChoice: 'required' })).toThrow(/needs tools/);
  });

  it('a template that writes calls in a format Orchard does not read is refused by name, never misread', () => {
    const odd = '{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}<<call {{ c.function.name }} {{ c.function.arguments | tojson }}>>{% endfor %}{% else %}{{ m.role }}: {{ m.content }}\n{% endif %}{% endfor %}{% if tools %}{{ tools | tojson }}{% endif %}';
    const opts = familyModelOptions('gemma2');
    const dir = join(tmp.dir, 'odd');
    writeRandomModel(dir, { ...opts, tokenizer: { ...opts.tokenizer!, chatTemplate: odd } });
    const oddTok = loadTokenizer(dir);
    expect(oddTok.chatTemplateCaps?.toolCalls).toBe(true);
    let err: DialectError | undefined;
    try {
      planChat(oddTok, 'odd-model', { messages: user, tools });
    } catch (e) {
      err = e as DialectError;
    }
    expect(err).toBeInstanceOf(DialectError);
    expect(err!.message).toMatch(/^the model 'odd-model' writes tool calls in a format Orchard does not read \(known: .*\)/);
    for (const known of ['qwen3-coder', 'seed-oss', 'command-r', 'granite', 'functionary-v3.1', 'functionary-v3.2']) expect(err!.message).toContain(known);
    expect(err!.code).toBe('tools_unsupported');
  });

  it("Granite's template never writes past calls: planChat writes them into the assistant's content as the model does", () => {
    const granite = loadTokenizer(writeFamilyModel(join(tmp.dir, 'granite-history'), 'granite').dir);
    expect(granite.chatTemplateCaps?.toolCalls).toBe(false);
    const plan = planChat(granite, 'granite', {
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris", "days": 2}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
      ],
      tools,
    });
    expect(plan.format).toBe('granite');
    expect(plan.prompt).toContain('<|start_of_role|>assistant<|end_of_role|><|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}]<|end_of_text|>');
    expect(plan.prompt).toContain('<|start_of_role|>tool<|end_of_role|>sunny<|end_of_text|>');
  });

  it('tool_choice none renders no tools and reads no calls', () => {
    const plan = planChat(qwen, 'q', { messages: user, tools, toolChoice: 'none' });
    expect(plan.prompt).not.toContain('get_weather');
    expect(plan.constraint).toBeNull();
    expect(coalesce(plan.parser().push('<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>'))).toEqual([{ type: 'content', text: '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>' }]);
  });

  it('response_format becomes a JSON constraint; with tools in auto mode, calls or that JSON', () => {
    expect(planChat(qwen, 'q', { messages: user, responseFormat: { type: 'json_object' } }).constraint).toEqual({ type: 'json_schema', schema: { type: 'object' } });
    const both = planChat(qwen, 'q', { messages: user, tools, responseFormat: { type: 'json_schema', schema: { type: 'object', properties: { a: { type: 'string' } } } } }).constraint;
    expect(both?.type).toBe('structural');
    expect(JSON.stringify(both)).toContain('"type":"or"');
  });
});
