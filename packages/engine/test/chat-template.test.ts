/**
 * Chat templates with tools: the published templates of real model families (fixtures/chat-templates)
 * render tool definitions, assistant tool calls and tool results through @huggingface/jinja, with the
 * argument form each template needs found by probing it.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ChatTemplate, ChatTemplateError, loadTokenizer, type ChatMessage, type ToolDefinition } from '../src/index.js';
import { byteToUnicode } from '../src/testing/index.js';
import { FAMILIES, familyTemplate, writeFamilyModel, type FamilyName } from './fixtures/chat-templates/families.js';
import { tempDir } from './helpers.js';

const tmp = tempDir('chat-template');
afterAll(tmp.cleanup);

const tools: ToolDefinition[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather in a city', parameters: { type: 'object', properties: { city: { type: 'string', description: 'City name' } }, required: ['city'] } } },
];
// Mistral's template wants 9-character alphanumeric call ids.
const conversation = (args: string | Record<string, unknown>): ChatMessage[] => [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: null, tool_calls: [{ id: 'call12345', type: 'function', function: { name: 'get_weather', arguments: args } }] },
  { role: 'tool', tool_call_id: 'call12345', name: 'get_weather', content: 'sunny, 21 C' },
];

// Granite 3.3's template never writes past calls (the caller writes them into the content).
const withTools = Object.keys(FAMILIES).filter((f) => f !== 'gemma2' && f !== 'granite') as FamilyName[];

describe('published chat templates with tools', () => {
  it.each(withTools)('%s: tool definitions, the call and its result reach the prompt', (family) => {
    const t = new ChatTemplate(familyTemplate(family), { bos_token: '<BOS>', eos_token: '<EOS>' });
    expect(t.caps.toolCalls).toBe(true);
    const text = t.render(conversation('{"city": "Paris"}'), { tools });
    expect(text).toContain('get_weather');
    // DeepSeek's templates write calls and results but never the definitions (the caller must).
    expect(text.includes('Current weather in a city')).toBe(t.caps.tools);
    expect(t.caps.tools).toBe(!family.startsWith('deepseek'));
    // As JSON, or key and value apart (Qwen3-Coder's <parameter=city>, GLM's <arg_key>city</arg_key>).
    if (family === 'qwen3Coder') expect(text).toContain('<parameter=city>\nParis\n</parameter>');
    else if (family === 'seedOss') expect(text).toContain('<parameter=city>Paris</parameter>');
    else if (family === 'glm46') expect(text).toContain('<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>');
    else expect(text).toMatch(/\{\s*"city":\s*"Paris"\s*\}/);
    expect(text).toContain('sunny, 21 C');
    // JSON text and an object are the same call to every template.
    expect(t.render(conversation({ city: 'Paris' }), { tools })).toBe(text);
  });

  it('finds which templates take arguments as JSON text (DeepSeek concatenates them) by probing, not by name', () => {
    const objects = withTools.filter((f) => new ChatTemplate(familyTemplate(f)).caps.objectArguments);
    expect(withTools.filter((f) => !objects.includes(f)).sort()).toEqual(['deepseekR1', 'deepseekV31']);
  });

  it('finds which templates fail on, or print, a tool-calling message’s null content (they get "")', () => {
    const nulls = withTools.filter((f) => !new ChatTemplate(familyTemplate(f)).caps.nullContent);
    // GLM-4.6 and Command R print it ("None", as jinja2 does); Qwen3 and gpt-oss fail on it.
    expect(nulls.sort()).toEqual(['commandR', 'glm46', 'gptOss', 'qwen3']);
    const glm = new ChatTemplate(familyTemplate('glm46'));
    expect(glm.render(conversation({ city: 'Paris' }), { tools })).not.toContain('None');
  });

  it('a template that never reads `tools` or `tool_calls` says so', () => {
    const caps = new ChatTemplate(familyTemplate('gemma2')).caps;
    expect(caps.tools).toBe(false);
    expect(caps.toolCalls).toBe(false);
  });

  it('leaves tools out when none are given (the template takes its no-tools branch)', () => {
    const t = new ChatTemplate(familyTemplate('qwen25'));
    const text = t.render([{ role: 'user', content: 'hi' }]);
    expect(text).not.toContain('<tools>');
    expect(t.render([{ role: 'user', content: 'hi' }], { tools: [] })).toBe(text);
  });

  it('names the problem when arguments are not JSON or the template raises', () => {
    const t = new ChatTemplate(familyTemplate('qwen25'));
    expect(() => t.render(conversation('{"city": '), { tools })).toThrow(ChatTemplateError);
    expect(() => t.render(conversation('{"city": '), { tools })).toThrow(/arguments are not a JSON object/);
    const mistral = new ChatTemplate(familyTemplate('mistral'));
    expect(() => mistral.render([{ role: 'assistant', content: 'x' }])).toThrow(/conversation roles must alternate/);
  });
});

describe('a model directory with a family template', () => {
  it('loadTokenizer renders tools and exposes the vocabulary for constrained decoding', () => {
    const m = writeFamilyModel(join(tmp.dir, 'qwen'), 'qwen25');
    const tok = loadTokenizer(m.dir);
    expect(tok.chatTemplateCaps).toEqual({ tools: true, toolCalls: true, objectArguments: true, nullContent: true });
    const ids = tok.encode(tok.applyChatTemplate(conversation({ city: 'Paris' }), { tools }), { addSpecialTokens: false });
    // <tool_call> is one (plain) added token, kept when decoding; <|im_end|> is special and dropped.
    expect(ids).toContain(m.specialIds['<tool_call>']);
    expect(tok.decode([m.specialIds['<tool_call>'], 104, 105, m.specialIds['<|im_end|>']])).toBe('<tool_call>hi');
    const v = tok.vocabulary();
    expect(v.kind).toBe('byte_level');
    expect(v.tokens[65]).toBe('A');
    expect(v.tokens[32]).toBe(byteToUnicode()[32]);
    expect(v.tokens[m.specialIds['<tool_call>']]).toBe('<tool_call>');
    expect(v.tokens.length).toBe(256 + FAMILIES.qwen25.specials.length);
  });

  it('spells non-ASCII added tokens in the byte-level alphabet so they decode to their text', () => {
    const m = writeFamilyModel(join(tmp.dir, 'ds'), 'deepseekV31');
    const v = loadTokenizer(m.dir).vocabulary();
    const spelled = v.tokens[m.specialIds['<｜tool▁sep｜>']];
    const table = byteToUnicode();
    const back = Buffer.from(Array.from(spelled, (c) => table.indexOf(c))).toString('utf8');
    expect(back).toBe('<｜tool▁sep｜>');
  });
});
