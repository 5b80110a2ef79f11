/**
 * Reasoning through the template: the switch (Ollama think, Anthropic thinking, reasoning_effort)
 * reaches the template's own variables, reasoning sent back in history is rendered where the template
 * keeps it, and asking a template that never reasons to reason is a 400 naming the model.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadTokenizer, type ModelTokenizer } from '@orchard/engine';
import { DialectError } from '../../src/requests/errors.js';
import { planChat } from '../../src/prompt/tools/plan.js';
import { anthropicBodySchema, anthropicRequest } from '../../src/dialects/anthropic.js';
import { writeFamilyModel, type FamilyName } from '../../../engine/test/fixtures/chat-templates/families.js';

const dir = mkdtempSync(join(tmpdir(), 'orchard-plan-reasoning-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const tokenizers = new Map<FamilyName, ModelTokenizer>();
const tok = (f: FamilyName) => {
  if (!tokenizers.has(f)) tokenizers.set(f, loadTokenizer(writeFamilyModel(join(dir, f), f).dir));
  return tokenizers.get(f)!;
};
const user = [{ role: 'user', content: 'Hi' }];

describe('the reasoning switch reaches the template', () => {
  it('Qwen3: off closes an empty think block (enable_thinking false); on and unset leave it to the model', () => {
    const off = planChat(tok('qwen3'), 'q', { messages: user, reasoning: false }).prompt;
    expect(off.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
    expect(planChat(tok('qwen3'), 'q', { messages: user, reasoning: true }).prompt.endsWith('<|im_start|>assistant\n')).toBe(true);
    expect(planChat(tok('qwen3'), 'q', { messages: user }).prompt.endsWith('<|im_start|>assistant\n')).toBe(true);
  });

  it('DeepSeek V3.1: on opens <think> (its `thinking` variable), off closes it', () => {
    expect(planChat(tok('deepseekV31'), 'd', { messages: user, reasoning: true }).prompt.endsWith('<｜Assistant｜><think>')).toBe(true);
    expect(planChat(tok('deepseekV31'), 'd', { messages: user, reasoning: false }).prompt.endsWith('<｜Assistant｜></think>')).toBe(true);
  });

  it('gpt-oss: an effort is its reasoning_effort', () => {
    expect(planChat(tok('gptOss'), 'g', { messages: user, reasoning: 'high' }).prompt).toContain('Reasoning: high');
    expect(planChat(tok('gptOss'), 'g', { messages: user }).prompt).toContain('Reasoning: medium');
  });

  it('GLM-4.6: off is its enable_thinking (/nothink and an empty think block)', () => {
    const off = planChat(tok('glm46'), 'z', { messages: user, reasoning: false }).prompt;
    expect(off).toContain('Hi/nothink');
    expect(off.endsWith('<|assistant|>\n<think></think>')).toBe(true);
    // The closed block is no reasoning to read: the reply is content.
    const p = planChat(tok('glm46'), 'z', { messages: user, reasoning: false }).parser();
    expect([...p.push('Hello'), ...p.end()]).toEqual([{ type: 'content', text: 'Hello' }]);
  });

  it('Seed-OSS: off is a thinking budget of 0 (the reply starts inside <seed:think>); on and unset leave the budget to the model', () => {
    const off = planChat(tok('seedOss'), 's', { messages: user, reasoning: false });
    expect(off.prompt).toContain('your thinking budget is 0');
    expect(off.prompt.endsWith('<seed:bos>assistant\n<seed:think><seed:cot_budget_reflect>')).toBe(true);
    const p = off.parser();
    const events = [...p.push('The budget is 0.</seed:cot_budget_reflect>\n</seed:think>Hello'), ...p.end()];
    expect(events.filter((e) => e.type === 'reasoning').map((e) => (e as { text: string }).text).join('')).toBe('The budget is 0.</seed:cot_budget_reflect>\n');
    expect(events.filter((e) => e.type === 'content').map((e) => (e as { text: string }).text).join('')).toBe('Hello');
    for (const reasoning of [true, undefined]) expect(planChat(tok('seedOss'), 's', { messages: user, reasoning }).prompt.endsWith('<seed:bos>assistant\n')).toBe(true);
  });

  it('reasoning on a template that never reasons is a 400 naming the model; off is fine', () => {
    let err: unknown;
    try {
      planChat(tok('gemma2'), 'gemma-it', { messages: user, reasoning: true });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DialectError);
    expect((err as DialectError).message).toMatch(/the model 'gemma-it' does not support thinking/);
    expect((err as DialectError).code).toBe('thinking_unsupported');
    expect(() => planChat(tok('gemma2'), 'gemma-it', { messages: user, reasoning: false })).not.toThrow();
  });
});

describe('reasoning in history reaches the template', () => {
  const tools = [{ type: 'function' as const, function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];

  it('an Anthropic thinking block before a tool_use is rendered by Qwen3 as the turn’s <think> (after the last user turn)', () => {
    const req = anthropicRequest(
      anthropicBodySchema.parse({
        model: 'q',
        max_tokens: 5,
        tools: [{ name: 'get_weather', description: 'Weather', input_schema: tools[0].function.parameters }],
        messages: [
          { role: 'user', content: 'Weather in Paris?' },
          { role: 'assistant', content: [{ type: 'thinking', thinking: 'The user wants the weather; call the tool.', signature: '' }, { type: 'tool_use', id: 't1', name: 'get_weather', input: { city: 'Paris' } }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'sunny' }] },
        ],
      }),
    );
    const prompt = planChat(tok('qwen3'), 'q', { messages: req.messages!, tools: req.tools }).prompt;
    expect(prompt).toContain('<|im_start|>assistant\n<think>\nThe user wants the weather; call the tool.\n</think>\n\n<tool_call>');
  });

  it('GLM-4.6 and gpt-oss read it too (reasoning_content; gpt-oss as its thinking)', () => {
    const messages = [
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', content: null, reasoning_content: 'Think about Paris.', tool_calls: [{ id: 'c1', type: 'function' as const, function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'sunny' },
    ];
    expect(planChat(tok('glm46'), 'z', { messages, tools }).prompt).toContain('<think>Think about Paris.</think>');
    expect(planChat(tok('gptOss'), 'g', { messages, tools }).prompt).toContain('Think about Paris.');
  });
});
