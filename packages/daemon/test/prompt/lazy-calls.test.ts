/**
 * tool_choice auto with each family's template: the reply is free text until the model writes the
 * format's opening marker, then only a well-formed call to one of the tools can follow (a lazy
 * grammar). Walked token by token through the compiled constraint with the family's tokenizer:
 * text first (anything allowed), the marker, then random picks among the allowed tokens — whatever
 * is picked, the parser reads one call whose arguments match the schema.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { compileConstraint, loadTokenizer, type ToolDefinition } from '@orchard/engine';
import { Prng } from '@orchard/engine/testing';
import { coalesce, type ReplyEvent, type ReplyParser } from '../../src/requests/reply.js';
import { planChat } from '../../src/prompt/tools/plan.js';
import { FAMILIES, writeFamilyModel, type FamilyName } from '../../../engine/test/fixtures/chat-templates/families.js';

const tmp = mkdtempSync(join(tmpdir(), 'orchard-lazy-calls-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const tools: ToolDefinition[] = [
  {
    type: 'function',
    function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string', description: 'City', maxLength: 12 }, days: { type: 'integer', description: 'Days', minimum: 1, maximum: 5 } }, required: ['city', 'days'], additionalProperties: false } },
  },
  { type: 'function', function: { name: 'get_time', description: 'Time', parameters: { type: 'object', properties: { zone: { type: 'string', description: 'Zone', enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false } } },
];

/** The marker each format opens calls with; null: the format has none, auto mode stays unconstrained. */
const TRIGGER: Partial<Record<FamilyName, string | null>> = {
  qwen3: '<tool_call>',
  hermes3: '<tool_call>',
  mistral: '[TOOL_CALLS]',
  deepseekV31: '<｜tool▁calls▁begin｜>',
  deepseekR1: '<｜tool▁calls▁begin｜>',
  kimiK2: '<|tool_calls_section_begin|>',
  qwen3Coder: '<tool_call>',
  glm46: '<tool_call>',
  seedOss: '<seed:tool_call>',
  commandR: 'Action:',
  granite: '<|tool_call|>',
  functionaryV31: '<function=',
  llama31: null,
  gptOss: null,
  functionaryV32: null,
};

/** Templates that open reasoning for the model even with reasoning off (R1 always, Seed-OSS with a budget of 0): the reply closes it first. */
const CLOSES_REASONING: Partial<Record<FamilyName, string>> = { deepseekR1: '</think>\n\n', seedOss: '</seed:think>' };

function feed(p: ReplyParser, text: string): ReplyEvent[] {
  const out: ReplyEvent[] = [];
  for (let i = 0, n = 1; i < text.length; i += n, n = (n % 7) + 1) out.push(...p.push(text.slice(i, i + n)));
  out.push(...p.end());
  return coalesce(out);
}

describe('tool_choice auto: free text, then from the marker on only a well-formed call', () => {
  it.each(Object.keys(TRIGGER) as FamilyName[])('%s', async (f) => {
    const info = writeFamilyModel(join(tmp, f), f, { seed: 5 });
    const tok = loadTokenizer(info.dir);
    const plan = planChat(tok, f, { messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, toolChoice: 'auto', parallelToolCalls: false, reasoning: false });
    const trigger = TRIGGER[f];
    if (trigger === null) {
      expect(plan.constraint).toBeNull();
      return;
    }
    expect(plan.constraint?.type).toBe('structural');
    expect(JSON.stringify(plan.constraint)).toContain(`"triggers":[${JSON.stringify(trigger)}]`);

    const vocabSize = info.config.vocab_size as number;
    const eos = tok.encode(FAMILIES[f].eos, { addSpecialTokens: false });
    const c = await compileConstraint(plan.constraint!, tok.vocabulary(), { vocabSize, stopIds: eos });
    const x = tok.encode('x', { addSpecialTokens: false })[0];
    const allowed = async () => {
      const logits = new Float32Array(vocabSize);
      await c.mask(logits);
      return logits;
    };
    const ids: number[] = [];
    try {
      for (const id of tok.encode(`Let me check. ${CLOSES_REASONING[f] ?? ''}`, { addSpecialTokens: false })) {
        expect((await allowed())[x], 'free text before the marker').toBe(0);
        c.accept(id);
        ids.push(id);
      }
      for (const id of tok.encode(trigger!, { addSpecialTokens: false })) {
        c.accept(id);
        ids.push(id);
      }
      expect((await allowed())[x], 'right after the marker only the call may follow').toBe(-Infinity);
      const pick = new Prng(7);
      for (let step = 0; !c.done && step < 400; step++) {
        const logits = await allowed();
        const open = [...logits.keys()].filter((i) => logits[i] === 0);
        const id = open[Math.floor(pick.next() * open.length)];
        if (eos.includes(id)) break;
        c.accept(id);
        ids.push(id);
      }
    } finally {
      c.dispose();
    }
    const text = tok.decode(ids, { skipSpecialTokens: false });
    const events = feed(plan.parser(), text);
    const calls = events.flatMap((e) => (e.type === 'tool_call' ? [e.call] : []));
    expect(calls, text).toHaveLength(1);
    expect(events.some((e) => (e.type === 'content' || e.type === 'reasoning') && e.text.includes('Let me check.')), text).toBe(true);
    const args = JSON.parse(calls[0].arguments);
    if (calls[0].name === 'get_weather') {
      expect(Object.keys(args).sort(), text).toEqual(['city', 'days']);
      expect([...args.city].length).toBeLessThanOrEqual(12);
      expect(args.days).toBeGreaterThanOrEqual(1);
      expect(args.days).toBeLessThanOrEqual(5);
    } else {
      expect(calls[0].name, text).toBe('get_time');
      expect(['UTC', 'CET']).toContain(args.zone);
    }
  });
});
