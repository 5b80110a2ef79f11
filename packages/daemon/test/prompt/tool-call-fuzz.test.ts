/**
 * Fuzz: every tool-call parser (and the <think> wrapper) fed truncated, shuffled, duplicated and
 * garbled call text in random pieces never throws, and whatever it reports as a call is well formed;
 * everything else comes out as text (nothing invented: never more text than went in).
 */
import { describe, expect, it } from 'vitest';
import { coalesce, type ReplyEvent, type ReplyParser } from '../../src/requests/reply.js';
import { TOOL_CALL_FORMATS } from '../../src/prompt/tools/registry.js';
import { withThinking } from '../../src/prompt/tools/thinking.js';
import { Prng } from '../../../engine/src/numeric/prng.js';

/** The engine's deterministic PRNG, as a function. */
function prng(seed: number): () => number {
  const p = new Prng(seed);
  return () => p.next();
}

const VALID: Record<string, string[]> = {
  hermes: ['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n<tool_call>\n{"name": "t", "arguments": {}}\n</tool_call>', 'Sure. <tool_call>{"name":"a","arguments":{"x":[1,{"y":"}"}]}}</tool_call> done'],
  'llama3-json': ['{"name": "get_weather", "parameters": {"city": "Paris"}}', '<|python_tag|>{"name": "a", "parameters": {"q": "x;y"}}; {"name": "b", "parameters": {}}'],
  mistral: ['[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "b", "arguments": {}}]', 'ok [TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}'],
  'deepseek-v3': ['<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'],
  'deepseek-v3.1': ['<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>b<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'],
  'kimi-k2': ['<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>'],
  'qwen3-coder': ['<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>', 'Let me check.\n<tool_call>\n<function=b>\n</function>\n</tool_call>'],
  'glm-4.5': ['<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>', 'ok\n<tool_call>b\n</tool_call>'],
  'seed-oss': ['<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n<parameter=days>2</parameter>\n</function>\n</seed:tool_call>', 'Sure.\n<seed:tool_call>\n<function=b>\n</function>\n</seed:tool_call>'],
  granite: ['<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "b", "arguments": {}}]', 'ok <|tool_call|>[{"arguments": {"q": "x]"}, "name": "a"}]'],
  'command-r': ['Action:\n```json\n[\n    {\n        "tool_name": "get_weather",\n        "parameters": {"city": "Paris"}\n    },\n    {"tool_name": "directly-answer", "parameters": {}}\n]```\n', 'Plan: look it up.\nAction: ```json\n[{"tool_name": "b", "parameters": {}}, {"tool_name": "c", "parameters": {"x": "```"}}]\n```'],
  'functionary-v3.1': ['<function=get_weather>{"city": "Paris"}</function>', 'Let me see. <function=a>{"q": "}"}</function><function=b>{}</function>'],
  'functionary-v3.2': ['get_weather\n{"city": "Paris"}>>>b\n{}', 'all\nChecking now.>>>get_weather\n{"city": "Rome"}'],
  harmony: ['<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}', '<|channel|>final<|message|>It is sunny.'],
};
const ALL_MARKERS = ['<tool_call>', '</tool_call>', '<function=', '</function>', '<parameter=', '</parameter>', '<arg_key>', '</arg_key>', '<arg_value>', '</arg_value>', '[TOOL_CALLS]', '[ARGS]', '<|python_tag|>', '<｜tool▁calls▁begin｜>', '<｜tool▁call▁begin｜>', '<｜tool▁sep｜>', '<｜tool▁call▁end｜>', '<|tool_call_begin|>', '<|tool_call_argument_begin|>', '<|channel|>', '<|message|>', '<|end|>', '<think>', '</think>', '<seed:tool_call>', '</seed:tool_call>', '<|tool_call|>', 'Action:', '```json', '>>>', '{', '}', '[', ']', '"', '\\', '```'];

function mutate(text: string, rnd: () => number): string {
  let t = text;
  const ops = 1 + Math.floor(rnd() * 4);
  for (let k = 0; k < ops; k++) {
    const i = Math.floor(rnd() * (t.length + 1));
    const j = Math.min(t.length, i + Math.floor(rnd() * 12));
    switch (Math.floor(rnd() * 6)) {
      case 0: t = t.slice(0, i); break; // truncate
      case 1: t = t.slice(0, i) + t.slice(j); break; // delete
      case 2: t = t.slice(0, i) + t.slice(i, j) + t.slice(i); break; // duplicate
      case 3: t = t.slice(0, i) + ALL_MARKERS[Math.floor(rnd() * ALL_MARKERS.length)] + t.slice(i); break; // stray marker
      case 4: t = t.slice(0, i) + String.fromCodePoint(Math.floor(rnd() * 0x2fff)) + t.slice(i); break; // odd character
      default: t = t.slice(j) + t.slice(0, i); // rotate
    }
  }
  return t;
}

function feed(p: ReplyParser, text: string, rnd: () => number): ReplyEvent[] {
  const out: ReplyEvent[] = [];
  for (let i = 0; i < text.length; ) {
    const n = 1 + Math.floor(rnd() * 9);
    out.push(...p.push(text.slice(i, i + n)));
    i += n;
  }
  out.push(...p.end());
  return coalesce(out);
}

describe('tool-call parsers under fuzzing', () => {
  it.each(TOOL_CALL_FORMATS.map((f) => [f.name, f] as const))('%s: 600 mangled replies, no throw, only well-formed calls', (name, format) => {
    const rnd = prng(name.length * 7919);
    const samples = VALID[name];
    expect(samples, `fuzz samples for ${name}`).toBeDefined();
    for (let n = 0; n < 600; n++) {
      const text = n < samples.length ? samples[n] : mutate(samples[n % samples.length], rnd);
      const thinking = n % 3 === 0;
      const parser = thinking ? withThinking(format.parser((i) => `c${i}`), n % 2 === 0) : format.parser((i) => `c${i}`);
      let events: ReplyEvent[] = [];
      expect(() => (events = feed(parser, thinking ? `<think>${text}` : text, rnd)), text).not.toThrow();
      let textOut = 0;
      for (const e of events) {
        if (e.type === 'tool_call') {
          expect(e.call.name, text).toMatch(/\S/);
          const args = JSON.parse(e.call.arguments);
          expect(args && typeof args === 'object' && !Array.isArray(args), text).toBe(true);
        } else textOut += e.text.length;
      }
      expect(textOut, text).toBeLessThanOrEqual(text.length + (thinking ? 7 : 0));
    }
  });

  it('the unmangled samples parse to their calls', () => {
    const calls = (name: string, text: string) => {
      const p = TOOL_CALL_FORMATS.find((f) => f.name === name)!.parser((i) => `c${i}`);
      return [...p.push(text), ...p.end()].filter((e) => e.type === 'tool_call').length;
    };
    expect(calls('hermes', VALID.hermes[0])).toBe(2);
    expect(calls('hermes', VALID.hermes[1])).toBe(1);
    expect(calls('llama3-json', VALID['llama3-json'][1])).toBe(2);
    expect(calls('mistral', VALID.mistral[0])).toBe(2);
    expect(calls('mistral', VALID.mistral[1])).toBe(1);
    expect(calls('deepseek-v3.1', VALID['deepseek-v3.1'][0])).toBe(2);
    expect(calls('harmony', VALID.harmony[0])).toBe(1);
    expect(calls('seed-oss', VALID['seed-oss'][0])).toBe(1);
    expect(calls('seed-oss', VALID['seed-oss'][1])).toBe(1);
    expect(calls('granite', VALID.granite[0])).toBe(2);
    expect(calls('granite', VALID.granite[1])).toBe(1);
    // Command R's directly-answer is no call.
    expect(calls('command-r', VALID['command-r'][0])).toBe(1);
    expect(calls('command-r', VALID['command-r'][1])).toBe(2);
    expect(calls('functionary-v3.1', VALID['functionary-v3.1'][1])).toBe(2);
    expect(calls('functionary-v3.2', VALID['functionary-v3.2'][0])).toBe(2);
    expect(calls('functionary-v3.2', VALID['functionary-v3.2'][1])).toBe(1);
  });
});
