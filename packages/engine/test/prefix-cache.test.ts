/**
 * The prefix cache (model/prefix-cache.ts) through InProcessModel and generate(): a chat's second turn
 * gives the same tokens as a cold run while only the tokens past the cached blocks are prefilled
 * (counted at the sessions' forward calls), in every split; a byte limit evicts leaves first; two
 * sequences that share a prefix and then diverge reuse only what they share.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, PrefixCache, type InProcessModel, type InProcessOptions, type LanguageModel } from '../src/index.js';
import { writeRandomModel } from '../src/testing/index.js';
import { tempDir } from './helpers.js';

const tmp = tempDir('prefix');
const models: InProcessModel[] = [];
afterAll(() => {
  models.forEach((m) => m.dispose());
  tmp.cleanup();
});
const dir = join(tmp.dir, 'qwen3');
writeRandomModel(dir, { variant: 'qwen3', seed: 9 });
const load = (o: InProcessOptions) => {
  const m = loadInProcessModel(dir, { maxBatch: 8, ...o });
  models.push(m);
  return m;
};

/** The model, with every token its sessions are fed counted. */
function counting(model: LanguageModel): { model: LanguageModel; fed: () => number } {
  let fed = 0;
  return {
    fed: () => fed,
    model: {
      config: model.config,
      maxSeqLen: model.maxSeqLen,
      newSession(capacity) {
        const s = model.newSession(capacity);
        const forward = s.forward.bind(s);
        return Object.assign(s, { forward: (t: ArrayLike<number>) => ((fed += t.length), forward(t)) });
      },
    },
  };
}

const TURN1 = Array.from({ length: 23 }, (_, i) => (i * 37 + 11) % 256);
const TURN2 = [200, 201, 202, 203, 204];
const BLOCK = 4;

describe.each([
  ['unsplit', {}],
  ['pipeline 2', { pipeline: 2 }],
  ['tensor 2', { tensor: 2 }],
] as [string, InProcessOptions][])('%s', (_name, split) => {
  it("a chat's second turn equals a cold run and prefills only the new tokens", async () => {
    const cold = load(split);
    const warm = counting(load({ ...split, prefixCacheBytes: 1 << 20, prefixBlockTokens: BLOCK }));
    const first = await generate(warm.model, TURN1, { maxTokens: 6, stopTokenIds: [] });
    expect(first.cachedPromptTokens).toBe(0);
    expect(warm.fed()).toBe(TURN1.length + 5);

    const prompt2 = [...TURN1, ...first.tokens, ...TURN2];
    const before = warm.fed();
    const second = await generate(warm.model, prompt2, { maxTokens: 6, stopTokenIds: [] });
    const reference = await generate(cold, prompt2, { maxTokens: 6, stopTokenIds: [] });
    expect(second.tokens).toEqual(reference.tokens);
    // The first turn's caches held its prompt and 5 of its 6 tokens (the last was never fed): 28 tokens, 7 blocks.
    const held = Math.floor((TURN1.length + 5) / BLOCK) * BLOCK;
    expect(second.cachedPromptTokens).toBe(held);
    expect(warm.fed() - before).toBe(prompt2.length - held + 5);
  });
});

describe('PrefixCache', () => {
  const model = load({ maxBatch: 16 });
  const tokensA = Array.from({ length: 9 }, (_, i) => i + 1);
  const tokensB = [...tokensA.slice(0, 8), 77];
  const tokensC = Array.from({ length: 9 }, (_, i) => 100 + i);
  /** Runs `tokens` through a fresh session and returns the shard's cache (after it). */
  async function filled(tokens: number[]) {
    const shard = model.stages[0][0];
    const cache = shard.newCache(32);
    await shard.forward({ tokens }, cache);
    return cache;
  }

  it('evicts least recently used leaves first under its byte limit', async () => {
    const shard = model.stages[0][0];
    const probe = new PrefixCache({ maxBytes: 1 << 30, blockTokens: BLOCK });
    probe.store(await filled(tokensA), tokensA);
    const blockBytes = probe.bytes / 2;
    expect(probe.size).toBe(2);

    const pc = new PrefixCache({ maxBytes: 3 * blockBytes, blockTokens: BLOCK });
    pc.store(await filled(tokensA), tokensA);
    pc.store(await filled(tokensC), tokensC);
    expect(pc.size).toBe(3);
    expect(pc.bytes).toBeLessThanOrEqual(3 * blockBytes);
    // A's second block (a leaf, least recently used) went; its first block and all of C stay.
    expect(pc.restore(shard.newCache(32), tokensA)).toBe(4);
    expect(pc.restore(shard.newCache(32), tokensC)).toBe(8);
    // Nothing fits a zero budget.
    const none = new PrefixCache({ maxBytes: 0, blockTokens: BLOCK });
    none.store(await filled(tokensA), tokensA);
    expect([none.size, none.bytes]).toEqual([0, 0]);
  });

  it('under a block limit evicts the same blocks as under the equal byte limit (what split ranks rely on)', async () => {
    const shard = model.stages[0][0];
    const byBlocks = new PrefixCache({ maxBytes: Infinity, maxBlocks: 3, blockTokens: BLOCK });
    byBlocks.store(await filled(tokensA), tokensA);
    byBlocks.store(await filled(tokensC), tokensC);
    expect(byBlocks.size).toBe(3);
    expect(byBlocks.restore(shard.newCache(32), tokensA)).toBe(4);
    expect(byBlocks.restore(shard.newCache(32), tokensC)).toBe(8);
    expect(() => new PrefixCache({ maxBytes: 1, maxBlocks: -1 })).toThrow(/maxBlocks must be >= 0/);
  });

  it('two sequences that share a prefix then diverge reuse exactly the shared blocks, with the same logits', async () => {
    const shard = model.stages[0][0];
    const pc = new PrefixCache({ maxBytes: 1 << 20, blockTokens: BLOCK });
    pc.store(await filled(tokensA), tokensA);
    // B shares A's first 8 tokens (two blocks); a sequence diverging inside the second block shares one.
    const b = shard.newCache(32);
    expect(pc.restore(b, tokensB)).toBe(8);
    const warm = Float32Array.from(await shard.forward({ tokens: tokensB.slice(8) }, b));
    const cold = Float32Array.from(await shard.forward({ tokens: tokensB }, shard.newCache(32)));
    expect(warm).toEqual(cold);
    const early = [...tokensA.slice(0, 6), 50, 51, 52];
    expect(pc.restore(shard.newCache(32), early)).toBe(4);
    expect(pc.restore(shard.newCache(32), tokensC)).toBe(0);
    // At least one token is always left to feed.
    expect(pc.restore(shard.newCache(32), tokensA.slice(0, 8))).toBe(4);
    await expect(async () => pc.restore(b, tokensA)).rejects.toThrow(/needs an empty KV cache/);
  });
});
