/**
 * Constrained decoding: JSON schemas, EBNF grammars and tool-call tags compiled against a real
 * tokenizer's vocabulary; sampling under the mask always yields text that parses and matches.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { compileConstraint, compileConstraintOrDrop, ConstraintError, generate, loadInProcessModel, loadTokenizer, parseConstraintSpec, Sampler, tokenLogprob, type ConstraintSpec } from '../src/index.js';
import { rewriteSchema } from '../src/generate/grammar/schema.js';
import { Prng } from '../src/numeric/prng.js';
import { writeFamilyModel } from './fixtures/chat-templates/families.js';
import { tempDir } from './helpers.js';

const tmp = tempDir('constraint');
afterAll(tmp.cleanup);
const info = writeFamilyModel(join(tmp.dir, 'qwen'), 'qwen25', { numLayers: 2, seed: 3 });
const tokenizer = loadTokenizer(info.dir);
const model = loadInProcessModel(info.dir);
const V = model.config.vocabSize;
const eos = [info.specialIds['<|im_end|>'], info.specialIds['<|endoftext|>']];

const person = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 130 },
    role: { enum: ['admin', 'user'] },
    tags: { type: 'array', items: { type: 'string', maxLength: 4 }, maxItems: 3 },
    active: { type: 'boolean' },
  },
  required: ['name', 'age', 'role', 'tags', 'active'],
  additionalProperties: false,
};

/** Checks a value against `person` by hand (the engine has no schema validator; the API tests use ajv). */
function isPerson(v: unknown): boolean {
  const o = v as Record<string, unknown>;
  return (
    !!o && typeof o === 'object' && Object.keys(o).sort().join() === 'active,age,name,role,tags' &&
    typeof o.name === 'string' && [...o.name].length <= 12 &&
    Number.isInteger(o.age) && (o.age as number) >= 0 && (o.age as number) <= 130 &&
    (o.role === 'admin' || o.role === 'user') &&
    Array.isArray(o.tags) && o.tags.length <= 3 && o.tags.every((t) => typeof t === 'string' && [...t].length <= 4) &&
    typeof o.active === 'boolean'
  );
}

/** Samples under the constraint from random logits (a stand-in for a model, much faster). */
async function sampleRandom(spec: ConstraintSpec, seed: number, maxTokens = 400): Promise<{ text: string; ended: boolean }> {
  const c = await compileConstraint(spec, tokenizer.vocabulary(), { vocabSize: V, stopIds: eos });
  const rng = new Prng(seed);
  const sampler = new Sampler({ temperature: 1, seed });
  const ids: number[] = [];
  try {
    while (ids.length < maxTokens && !c.done) {
      const logits = Float32Array.from({ length: V }, () => rng.symmetric(4));
      await c.mask(logits);
      const id = sampler.sample(logits);
      c.accept(id);
      ids.push(id);
    }
    return { text: tokenizer.decode(ids, { skipSpecialTokens: false }).replace(/<\|im_end\|>$|<\|endoftext\|>$/, ''), ended: c.done };
  } finally {
    c.dispose();
  }
}

describe('JSON schema', () => {
  it('every sampled output parses and matches the schema (40 runs at temperature 1)', async () => {
    for (let seed = 1; seed <= 40; seed++) {
      const { text, ended } = await sampleRandom({ type: 'json_schema', schema: person }, seed);
      expect(ended).toBe(true);
      expect(isPerson(JSON.parse(text)), text).toBe(true);
      // One line, Python's separators: nothing left for the sampler to pad.
      expect(text).not.toMatch(/\n|\t|: {2}|, {2}/);
    }
  });

  it('generate() with a model: the output parses and matches, logprobs are the unmasked distribution', async () => {
    const prompt = tokenizer.encode(tokenizer.applyChatTemplate([{ role: 'user', content: 'A person, as JSON.' }]), { addSpecialTokens: false });
    for (const seed of [1, 2, 3]) {
      const r = await generate(model, prompt, { tokenizer, temperature: 1, seed, maxTokens: 200, constraint: { type: 'json_schema', schema: person }, logprobs: 3 });
      expect(r.finishReason).toBe('stop');
      expect(isPerson(JSON.parse(r.text)), r.text).toBe(true);
      expect(r.logprobs).toHaveLength(r.tokens.length);
      for (const lp of r.logprobs!) {
        expect(lp.logprob).toBeLessThanOrEqual(0);
        expect(lp.top).toHaveLength(3);
        expect(lp.top[0].logprob).toBeGreaterThanOrEqual(lp.top[2].logprob);
      }
    }
  });

  it('without a constraint the same model writes something that is not JSON (the mask does the work)', async () => {
    const prompt = tokenizer.encode('{"name": ', { addSpecialTokens: false });
    const r = await generate(model, prompt, { tokenizer, temperature: 1, seed: 1, maxTokens: 40 });
    expect(() => JSON.parse(r.text)).toThrow();
  });
});

describe('where xgrammar alone lets invalid values through', () => {
  it('strings stay well-formed UTF-8 (no lone bytes decoding to U+FFFD) and within maxLength characters', async () => {
    for (let seed = 1; seed <= 15; seed++) {
      const { text } = await sampleRandom({ type: 'json_schema', schema: { type: 'string', maxLength: 30 } }, seed);
      const v = JSON.parse(text) as string;
      expect(v).not.toContain('\ufffd');
      expect([...v].length).toBeLessThanOrEqual(30);
      expect(Buffer.from(Buffer.from(v, 'utf8').toString('utf8'), 'utf8').toString('utf8')).toBe(v);
    }
  });

  it('bounded integers become the enum of exactly their values (xgrammar 0.1.27 admits 121-129 for "maximum": 120)', () => {
    expect(rewriteSchema({ type: 'integer', minimum: 0, maximum: 3 })).toEqual({ type: 'integer', enum: [0, 1, 2, 3] });
    expect(rewriteSchema({ type: 'integer', exclusiveMinimum: 1, exclusiveMaximum: 4.5 })).toEqual({ type: 'integer', enum: [2, 3, 4] });
    const nested = rewriteSchema({ type: 'object', properties: { a: { type: 'array', items: { type: 'integer', minimum: 5, maximum: 6 } }, b: { anyOf: [{ type: 'integer', minimum: -1, maximum: 0 }] } } }) as Record<string, any>;
    expect(nested.properties.a.items.enum).toEqual([5, 6]);
    expect(nested.properties.b.anyOf[0].enum).toEqual([-1, 0]);
    // Too wide a range, one bound, or data that merely looks like a schema: untouched.
    expect(rewriteSchema({ type: 'integer', minimum: 0, maximum: 1e9 })).toEqual({ type: 'integer', minimum: 0, maximum: 1e9 });
    expect(rewriteSchema({ type: 'integer', minimum: 0 })).toEqual({ type: 'integer', minimum: 0 });
    expect(rewriteSchema({ const: { type: 'integer', minimum: 0, maximum: 1 } })).toEqual({ const: { type: 'integer', minimum: 0, maximum: 1 } });
  });
});

describe('tool-call tags', () => {
  const weather = { type: 'object', properties: { city: { type: 'string', maxLength: 10 }, days: { type: 'integer', minimum: 1, maximum: 7 } }, required: ['city', 'days'], additionalProperties: false };
  const tag = (name: string) => ({ type: 'tag' as const, begin: `<tool_call>\n{"name": "${name}", "arguments": `, content: { type: 'json_schema' as const, json_schema: weather }, end: '}\n</tool_call>' });

  it('one or more calls in a row, each naming a tool and carrying arguments that match its schema', async () => {
    for (let seed = 1; seed <= 10; seed++) {
      const { text, ended } = await sampleRandom({ type: 'structural', format: { type: 'tags_with_separator', tags: [tag('get_weather'), tag('get_forecast')], separator: '\n', at_least_one: true } }, seed);
      expect(ended).toBe(true);
      const calls = [...text.matchAll(/<tool_call>\n(.*?)\n<\/tool_call>/gs)].map((m) => JSON.parse(m[1]));
      expect(calls.length).toBeGreaterThanOrEqual(1);
      expect(text.replace(/<tool_call>\n.*?\n<\/tool_call>/gs, '').trim()).toBe('');
      for (const c of calls) {
        expect(['get_weather', 'get_forecast']).toContain(c.name);
        expect(Object.keys(c.arguments).sort()).toEqual(['city', 'days']);
        expect(c.arguments.days).toBeGreaterThanOrEqual(1);
      }
    }
  });
});

describe('errors and the wire form', () => {
  it('a bad schema or grammar is a ConstraintError with xgrammar\'s reason, and the next compile works', async () => {
    const vocab = tokenizer.vocabulary();
    const o = { vocabSize: V, stopIds: eos };
    await expect(compileConstraint({ type: 'json_schema', schema: { type: 'nonsense' } }, vocab, o)).rejects.toThrow(/cannot compile the JSON schema: Unsupported type "nonsense"/);
    await expect(compileConstraint({ type: 'grammar', ebnf: 'root ::= "a" b' }, vocab, o)).rejects.toThrow(ConstraintError);
    await expect(compileConstraint({ type: 'grammar', ebnf: 'root ::= "a" b' }, vocab, o)).rejects.toThrow(/Rule "b" is not defined/);
    const c = await compileConstraint({ type: 'grammar', ebnf: 'root ::= "yes" | "no"' }, vocab, o);
    const { text } = await sampleRandom({ type: 'grammar', ebnf: 'root ::= "yes" | "no"' }, 4);
    expect(['yes', 'no']).toContain(text);
    c.dispose();
  });

  it('an optional tool-call grammar that cannot be compiled is dropped (generate reads the reply unconstrained); a required one still fails', async () => {
    const broken = { type: 'tag' as const, begin: '<tool_call>\n', content: { type: 'json_schema' as const, json_schema: { type: 'nonsense' } }, end: '\n</tool_call>' };
    const spec = (optional: boolean): ConstraintSpec => ({ type: 'structural', format: { type: 'tags_with_separator', tags: [broken], separator: '\n', at_least_one: true }, optional });
    const o = { vocabSize: V, stopIds: eos };
    const why: string[] = [];
    expect(await compileConstraintOrDrop(spec(true), tokenizer.vocabulary(), o, (w) => why.push(w))).toBeNull();
    expect(why).toEqual([expect.stringMatching(/cannot compile the structural format: .*nonsense/)]);
    await expect(compileConstraintOrDrop(spec(false), tokenizer.vocabulary(), o)).rejects.toThrow(ConstraintError);
    await expect(compileConstraintOrDrop({ type: 'grammar', ebnf: 'root ::= "a" b' }, tokenizer.vocabulary(), o)).rejects.toThrow(ConstraintError);
    const prompt = tokenizer.encode('Hello');
    const plain = await generate(model, prompt, { tokenizer, temperature: 0, maxTokens: 12 });
    const dropped = await generate(model, prompt, { tokenizer, temperature: 0, maxTokens: 12, constraint: spec(true) });
    expect(dropped.tokens).toEqual(plain.tokens);
    await expect(generate(model, prompt, { tokenizer, temperature: 0, maxTokens: 12, constraint: spec(false) })).rejects.toThrow(ConstraintError);
  });

  it('a spec survives JSON and is checked when it comes back', () => {
    const spec: ConstraintSpec = { type: 'json_schema', schema: person };
    expect(parseConstraintSpec(JSON.parse(JSON.stringify(spec)))).toEqual(spec);
    expect(() => parseConstraintSpec({ type: 'regexp', pattern: 'x' })).toThrow(/unknown or malformed type "regexp"/);
    expect(() => parseConstraintSpec({ type: 'json_schema', schema: [] })).toThrow(ConstraintError);
    expect(() => parseConstraintSpec(null)).toThrow(/expected an object/);
  });
});

describe('tokenLogprob', () => {
  it('is log-softmax of the logits, with the top alternatives in order', () => {
    const logits = Float32Array.from([1, 3, 2, 3]);
    const z = Math.log(Math.exp(1) + 2 * Math.exp(3) + Math.exp(2));
    const lp = tokenLogprob(logits, 2, 3);
    expect(lp.logprob).toBeCloseTo(2 - z, 6);
    expect(lp.top.map((t) => t.id)).toEqual([1, 3, 2]);
    expect(lp.top[0].logprob).toBeCloseTo(3 - z, 6);
    expect(tokenLogprob(logits, 0, 0).top).toEqual([]);
  });
});
