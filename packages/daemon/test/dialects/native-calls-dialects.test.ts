/**
 * Each family's native tool call — as its own published template writes it back — streamed a few
 * characters at a time through the parser the template selects, comes back as the same structured
 * call in the OpenAI (chat deltas), Anthropic (tool_use blocks), Ollama (message.tool_calls) and
 * Responses (function_call items) shapes. Reasoning comes back as reasoning in each.
 */
import { describe, expect, it } from 'vitest';
import { ChatTemplate, type ChatMessage, type ToolDefinition } from '@orchard/engine';
import { coalesce, type ReplyEvent, type ReplyParser } from '../../src/requests/reply.js';
import { detectToolCallFormat } from '../../src/prompt/tools/registry.js';
import { thinkingMarkers, withThinking } from '../../src/prompt/tools/thinking.js';
import { callsIntoContent } from '../../src/prompt/tools/plan.js';
import { templateReply } from '../prompt/template-reply.js';
import { mistral } from '../../src/prompt/tools/formats/mistral.js';
import { chatDeltas } from '../../src/dialects/openai-chat.js';
import { AnthropicStream } from '../../src/dialects/anthropic.js';
import { ollamaMessagePart } from '../../src/dialects/ollama.js';
import { ResponseBuilder } from '../../src/dialects/responses.js';
import type { ServeEvent } from '../../src/requests/request.js';
import { FAMILIES, familyTemplate, type FamilyName } from '../../../engine/test/fixtures/chat-templates/families.js';

// Described parameters: Command R's template concatenates each description (jinja2 refuses a missing one too).
const tools: ToolDefinition[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string', description: 'City' }, days: { type: 'integer', description: 'Days' }, zip: { type: 'string', description: 'Postcode' } }, required: ['city'] } } },
];
// A string that looks like a number ("75001") must stay a string; an integer must stay an integer.
const ARGS = { city: 'Paris', days: 2, zip: '75001' };

type Call = { name: string; args: unknown };

/** Feeds text in pieces of 1..7 characters, as tokens arrive. */
function stream(p: ReplyParser, text: string): ReplyEvent[] {
  const out: ReplyEvent[] = [];
  for (let i = 0, n = 1; i < text.length; i += n, n = (n % 7) + 1) out.push(...p.push(text.slice(i, i + n)));
  return [...out, ...p.end()];
}

function serveEvents(events: ReplyEvent[]): ServeEvent[] {
  return events.map((e) => (e.type === 'content' ? { type: 'text', text: e.text } : e.type === 'reasoning' ? { type: 'reasoning', text: e.text } : { type: 'tool_call', index: e.index, call: e.call }));
}

const done: Extract<ServeEvent, { type: 'done' }> = { type: 'done', finishReason: 'tool_calls', promptTokens: 1, completionTokens: 1, decodeTokensPerSecond: null };

function viaOpenAi(events: ServeEvent[]): Call[] {
  const calls: { name: string; args: string }[] = [];
  for (const e of events) {
    for (const { delta } of chatDeltas(e) ?? []) {
      for (const d of (delta.tool_calls as { index: number; function: { name?: string; arguments?: string } }[] | undefined) ?? []) {
        calls[d.index] ??= { name: '', args: '' };
        if (d.function.name) calls[d.index].name = d.function.name;
        calls[d.index].args += d.function.arguments ?? '';
      }
    }
  }
  return calls.map((c) => ({ name: c.name, args: JSON.parse(c.args) }));
}

function viaAnthropic(events: ServeEvent[]): Call[] {
  const s = new AnthropicStream('msg_1', 'm');
  const blocks = new Map<number, { name: string; json: string }>();
  for (const ev of [...events.flatMap((e) => s.event(e)), ...s.finish(done)]) {
    const d = ev.data as { type: string; index: number; content_block?: { type: string; name: string }; delta?: { type: string; partial_json?: string } };
    if (d.type === 'content_block_start' && d.content_block?.type === 'tool_use') blocks.set(d.index, { name: d.content_block.name, json: '' });
    if (d.type === 'content_block_delta' && d.delta?.type === 'input_json_delta') blocks.get(d.index)!.json += d.delta.partial_json;
  }
  return [...blocks.values()].map((b) => ({ name: b.name, args: JSON.parse(b.json) }));
}

function viaOllama(events: ServeEvent[]): Call[] {
  return events.flatMap((e) => ((ollamaMessagePart(e)?.tool_calls as { function: { name: string; arguments: unknown } }[] | undefined) ?? []).map((c) => ({ name: c.function.name, args: c.function.arguments })));
}

function viaResponses(events: ServeEvent[]): Call[] {
  const b = new ResponseBuilder('m');
  events.forEach((e) => b.event(e));
  const output = b.finish(done).response.output as { type: string; name: string; arguments: string }[];
  return output.filter((o) => o.type === 'function_call').map((o) => ({ name: o.name, args: JSON.parse(o.arguments) }));
}

/** The reply text of one call, as the family's template writes it in history. */
function nativeReply(f: FamilyName): string {
  const fam = FAMILIES[f] as { eos: string; moreEos?: string[] };
  const t = new ChatTemplate(familyTemplate(f), { bos_token: '', eos_token: fam.eos });
  const user: ChatMessage = { role: 'user', content: 'Weather in Paris?' };
  const p1 = t.render([user], { tools });
  const history: ChatMessage[] = [user, { role: 'assistant', content: null, tool_calls: [{ id: 'abcdefghi', type: 'function', function: { name: 'get_weather', arguments: JSON.stringify(ARGS) } }] }];
  // Granite's template never writes calls: they go in the content, as planChat sends them.
  const p2 = t.render(t.caps.toolCalls ? history : callsIntoContent(detectToolCallFormat(t.source)!, history), { tools, addGenerationPrompt: false });
  return templateReply(f, p1, p2);
}

const families = (Object.keys(FAMILIES) as FamilyName[]).filter((f) => detectToolCallFormat(familyTemplate(f)));

describe('a native call streamed in pieces is the same call in every dialect', () => {
  it.each(families)('%s', (f) => {
    const template = familyTemplate(f);
    const format = detectToolCallFormat(template)!;
    const parser = format.parser((i) => `call_${i}`, tools);
    const reply = nativeReply(f);
    const think = thinkingMarkers(template);
    const events = serveEvents(coalesce(stream(think ? withThinking(parser, false, think) : parser, reply)));
    const want: Call[] = [{ name: 'get_weather', args: ARGS }];
    expect(viaOpenAi(events), reply).toEqual(want);
    expect(viaAnthropic(events)).toEqual(want);
    expect(viaOllama(events)).toEqual(want);
    expect(viaResponses(events)).toEqual(want);
  });

  it('Llama 3.1 built-in tools: brave_search announced as a built-in, its call written and read as brave_search.call(query="...")', () => {
    const search: ToolDefinition = { type: 'function', function: { name: 'brave_search', description: 'Web search', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } } };
    const t = new ChatTemplate(familyTemplate('llama31'), { bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>' });
    const variables = { builtin_tools: ['brave_search'] };
    const call = { id: 'c1', type: 'function' as const, function: { name: 'brave_search', arguments: '{"query": "weather in Paris, today"}' } };
    const p1 = t.render([{ role: 'user', content: 'Weather?' }], { variables });
    const p2 = t.render([{ role: 'user', content: 'Weather?' }, { role: 'assistant', content: null, tool_calls: [call] }], { variables, addGenerationPrompt: false });
    expect(p1).toContain('Environment: ipython\nTools: brave_search');
    let reply = p2.slice(p1.length);
    for (const e of ['<|eom_id|>', '<|eot_id|>']) reply = reply.split(e).join('');
    expect(reply.startsWith('<|python_tag|>brave_search.call(query=')).toBe(true);
    const format = detectToolCallFormat(t.source)!;
    const events = serveEvents(coalesce(stream(format.parser((i) => `c${i}`, [search]), reply)));
    const want = [{ name: 'brave_search', args: JSON.parse(call.function.arguments) }];
    expect(viaOpenAi(events), reply).toEqual(want);
    expect(viaAnthropic(events)).toEqual(want);
    expect(viaOllama(events)).toEqual(want);
    expect(viaResponses(events)).toEqual(want);
    // The model writing one itself, other literal kinds among the keyword arguments.
    const own = serveEvents(coalesce(stream(format.parser((i) => `c${i}`, [search]), '<|python_tag|>wolfram_alpha.call(query=\'2+2\', n=3, exact=True)')));
    expect(viaOpenAi(own)).toEqual([{ name: 'wolfram_alpha', args: { query: '2+2', n: 3, exact: true } }]);
    // Text that only starts like a name is text.
    expect(viaOpenAi(serveEvents(coalesce(stream(format.parser((i) => `c${i}`), '<|python_tag|>print("hi")'))))).toEqual([]);
  });

  it('a Hermes call whose argument text holds the format’s own markers is still one call', () => {
    const args = { code: 'print("</tool_call>")\n<tool_call>' };
    const text = `<tool_call>\n${JSON.stringify({ name: 'run', arguments: args })}\n</tool_call>`;
    const format = detectToolCallFormat(familyTemplate('qwen25'))!;
    const events = serveEvents(coalesce(stream(format.parser((i) => `c${i}`), text)));
    expect(viaOpenAi(events)).toEqual([{ name: 'run', args }]);
    expect(events.filter((e) => e.type === 'text')).toEqual([]);
  });

  it("Mistral's NAME[ARGS]{json}, with [ARGS] split across pieces", () => {
    const text = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 2, "zip": "75001"}';
    for (const cut of [13, 20, 22, 23, 24, 25]) {
      const p = mistral.parser((i) => `c${i}`);
      const events = serveEvents(coalesce([...p.push(text.slice(0, cut)), ...p.push(text.slice(cut)), ...p.end()]));
      expect(viaOpenAi(events), `cut at ${cut}`).toEqual([{ name: 'get_weather', args: ARGS }]);
    }
    const p = mistral.parser((i) => `c${i}`);
    expect(viaAnthropic(serveEvents(coalesce(stream(p, text))))).toEqual([{ name: 'get_weather', args: ARGS }]);
  });

  it("text beside calls stays text: Functionary v3.2's >>>all, Command R's words before Action:, Granite's before <|tool_call|>", () => {
    const cases: [FamilyName, string, string][] = [
      ['functionaryV32', 'all\nChecking.>>>get_weather\n{"city": "Paris", "days": 2, "zip": "75001"}', 'Checking.'],
      ['commandR', 'I will look.\nAction:\n```json\n[{"tool_name": "get_weather", "parameters": {"city": "Paris", "days": 2, "zip": "75001"}}]```', 'I will look.\n'],
      ['granite', 'Sure: <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2, "zip": "75001"}}]', 'Sure: '],
    ];
    for (const [f, reply, text] of cases) {
      const events = serveEvents(coalesce(stream(detectToolCallFormat(familyTemplate(f))!.parser((i) => `c${i}`, tools), reply)));
      expect(viaOpenAi(events), f).toEqual([{ name: 'get_weather', args: ARGS }]);
      expect(events.filter((e) => e.type === 'text').map((e) => (e as { text: string }).text).join(''), f).toBe(text);
    }
  });

  it('Seed-OSS reasoning in <seed:think> comes back as reasoning before its call', () => {
    const template = familyTemplate('seedOss');
    const reply = '<seed:think>The user wants weather.</seed:think>\n<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n<parameter=days>2</parameter>\n<parameter=zip>75001</parameter>\n</function>\n</seed:tool_call>';
    const events = serveEvents(coalesce(stream(withThinking(detectToolCallFormat(template)!.parser((i) => `c${i}`, tools), false, thinkingMarkers(template)!), reply)));
    expect(events[0]).toEqual({ type: 'reasoning', text: 'The user wants weather.' });
    expect(viaAnthropic(events)).toEqual([{ name: 'get_weather', args: ARGS }]);
  });

  it('reasoning comes back as reasoning in every dialect', () => {
    const events: ServeEvent[] = [{ type: 'reasoning', text: 'Let me think.' }, { type: 'text', text: 'Sunny.' }];
    expect(events.flatMap((e) => chatDeltas(e) ?? []).map((d) => d.delta)).toEqual([{ reasoning_content: 'Let me think.' }, { content: 'Sunny.' }]);
    const s = new AnthropicStream('m1', 'm');
    const starts = events.flatMap((e) => s.event(e)).filter((x) => x.event === 'content_block_start').map((x) => (x.data.content_block as { type: string }).type);
    expect(starts).toEqual(['thinking', 'text']);
    expect(ollamaMessagePart(events[0])).toMatchObject({ thinking: 'Let me think.' });
    const b = new ResponseBuilder('m');
    events.forEach((e) => b.event(e));
    const out = b.finish({ ...done, finishReason: 'stop' }).response.output as { type: string; content: { type: string; text: string }[] }[];
    expect(out.map((o) => o.type)).toEqual(['reasoning', 'message']);
    expect(out[0].content[0]).toEqual({ type: 'reasoning_text', text: 'Let me think.' });
  });
});
