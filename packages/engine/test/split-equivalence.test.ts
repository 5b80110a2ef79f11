/**
 * Proof 1: every split of a model computes the same function as the unsplit model. For each
 * architecture variant, pipeline splits (2 stages, 3 uneven stages) and tensor splits (2 and 4 ranks,
 * the latter replicating KV heads; uneven head counts per rank, 2 and 3 ranks; for mixtures of
 * experts, each rank holding its block of experts) give last-token logits within 1e-5 of the unsplit run (f32) after a
 * multi-chunk prompt and after every greedy decode step, and the same greedy tokens.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadInProcessModel, loadModelConfig, type InProcessOptions, type LanguageModel } from '../src/index.js';
import { writeRandomModel, type RandomModelOptions } from '../src/testing/index.js';
import { argmaxOf, maxAbsDiff, tempDir } from './helpers.js';

const tmp = tempDir('split');
afterAll(tmp.cleanup);

const VARIANTS: Record<string, RandomModelOptions> = {
  'llama GQA': { variant: 'llama' },
  'llama3 rope scaling': { variant: 'llama3' },
  'llama tied embeddings': { variant: 'llama', tiedEmbeddings: true, numKvHeads: 4 },
  mistral: { variant: 'mistral', numKvHeads: 1 },
  'mistral sliding window': { variant: 'mistral', slidingWindow: 6 },
  'llama attention_bias': { variant: 'llama', attentionBias: true },
  'llama 12 heads / 3 KV (groups straddle ranks)': { variant: 'llama', hiddenSize: 96, numHeads: 12, numKvHeads: 3 },
  'qwen2 qkv bias': { variant: 'qwen2' },
  'qwen3 q/k norm': { variant: 'qwen3' },
  'qwen3 tied, 3 shard files': { variant: 'qwen3', tiedEmbeddings: true, shards: 3 },
  // Mixtures of experts: tensor ranks hold whole experts (2 or 4 of 8 each); MLA splits by heads.
  'qwen3-moe (layer 1 dense)': { variant: 'qwen3-moe' },
  'qwen3-moe tied router rows': { variant: 'qwen3-moe', routerTies: true, expertsPerToken: 3 },
  mixtral: { variant: 'mixtral' },
  'deepseek-v3 (MLA, shared expert, grouped routing)': { variant: 'deepseek-v3' },
  'deepseek-v3 plain q_proj, bf16': { variant: 'deepseek-v3', qLoraRank: null, dtype: 'bf16' },
  'gpt-oss (sinks, sliding/full layers, merged experts)': { variant: 'gpt-oss' },
};

const SPLITS: Record<string, InProcessOptions> = {
  'pipeline 2': { pipeline: 2 },
  'pipeline 3 uneven (2,1,1)': { pipeline: [2, 1, 1] },
  'tensor 2': { tensor: 2 },
  'tensor 4': { tensor: 4 },
  'pipeline 2 × tensor 2': { pipeline: 2, tensor: 2 },
};

/** Uneven head splits (groups of unequal members), given the model's head count H. */
const UNEVEN: Record<string, (H: number) => InProcessOptions> = {
  'tensor 2 uneven heads (1, H-1)': (H) => ({ tensor: 2, heads: [1, H - 1] }),
  'tensor 3 uneven heads': (H) => ({ tensor: 3, heads: [Math.floor(H / 4), Math.ceil((3 * H) / 8), H - Math.floor(H / 4) - Math.ceil((3 * H) / 8)] }),
  'pipeline 2 × tensor 2 uneven heads': (H) => ({ pipeline: 2, tensor: 2, heads: [H / 2 + 1, H / 2 - 1] }),
};

// 21 prompt tokens with maxBatch 8: three chunks (8, 8, 5), so batching across chunks is exercised.
const PROMPT = Array.from({ length: 21 }, (_, i) => (i * 53 + 7) % 256);
const STEPS = 8;

/** Logits after the prompt and after each greedy token, and the greedy tokens. */
async function trace(model: LanguageModel): Promise<{ logits: Float32Array[]; tokens: number[] }> {
  const s = model.newSession(64);
  const logits: Float32Array[] = [Float32Array.from(await s.forward(PROMPT))];
  const tokens: number[] = [];
  for (let i = 0; i < STEPS; i++) {
    tokens.push(argmaxOf(logits[logits.length - 1]));
    logits.push(Float32Array.from(await s.forward([tokens[i]])));
  }
  return { logits, tokens };
}

describe.each(Object.entries(VARIANTS))('%s', (name, options) => {
  const dir = join(tmp.dir, name.replace(/[^a-z0-9]+/gi, '-'));
  writeRandomModel(dir, { seed: 11, ...options });
  let base: Promise<{ logits: Float32Array[]; tokens: number[] }> | undefined;
  const unsplit = () => (base ??= trace(loadInProcessModel(dir, { maxBatch: 8 })));

  it('unsplit logits are finite and not degenerate', async () => {
    const { logits, tokens } = await unsplit();
    expect(logits[0].every(Number.isFinite)).toBe(true);
    expect(maxAbsDiff(logits[0], new Float32Array(logits[0].length))).toBeGreaterThan(0.1);
    expect(new Set(tokens).size).toBeGreaterThan(1);
  });

  it.each(Object.entries(SPLITS))('%s equals the unsplit model', async (_split, split) => {
    const ref = await unsplit();
    const got = await trace(loadInProcessModel(dir, { maxBatch: 8, ...split }));
    expect(got.tokens).toEqual(ref.tokens);
    for (let i = 0; i < ref.logits.length; i++) expect(maxAbsDiff(got.logits[i], ref.logits[i])).toBeLessThanOrEqual(1e-5);
  });

  it.each(Object.entries(UNEVEN))('%s equals the unsplit model', async (_split, split) => {
    const ref = await unsplit();
    const got = await trace(loadInProcessModel(dir, { maxBatch: 8, ...split(loadModelConfig(dir).numHeads) }));
    expect(got.tokens).toEqual(ref.tokens);
    for (let i = 0; i < ref.logits.length; i++) expect(maxAbsDiff(got.logits[i], ref.logits[i])).toBeLessThanOrEqual(1e-5);
  });
});

describe('prompt batching', () => {
  it('a prompt fed in batches equals the same prompt fed one token at a time', async () => {
    const dir = join(tmp.dir, 'batching');
    writeRandomModel(dir, { variant: 'qwen2', seed: 4 });
    const model = loadInProcessModel(dir, { maxBatch: 8 });
    const batched = Float32Array.from(await model.newSession().forward(PROMPT));
    const s = model.newSession();
    let last: Float32Array = new Float32Array(0);
    for (const t of PROMPT) last = await s.forward([t]);
    expect(maxAbsDiff(batched, last)).toBeLessThanOrEqual(1e-6);
    // And a different prompt really changes the logits (the comparison above can fail).
    const other = await model.newSession().forward([...PROMPT.slice(0, -1), (PROMPT[20] + 1) % 256]);
    expect(maxAbsDiff(batched, other)).toBeGreaterThan(1e-3);
  });
});

const bundled = join(import.meta.dirname, '../../../models/orchard-demo');
describe.skipIf(!existsSync(join(bundled, 'model.safetensors')))('bundled demo model (F16, 6 heads / 3 KV heads)', () => {
  let base: Promise<{ logits: Float32Array[]; tokens: number[] }> | undefined;
  const unsplit = () => (base ??= trace(loadInProcessModel(bundled, { maxBatch: 8 })));
  it.each([
    ['pipeline 4', { pipeline: 4 }],
    ['pipeline 3 uneven (1,2,1)', { pipeline: [1, 2, 1] }],
    ['tensor 2 (a KV head shared by both ranks)', { tensor: 2 }],
    ['tensor 3', { tensor: 3 }],
    ['pipeline 2 × tensor 2', { pipeline: 2, tensor: 2 }],
  ] as [string, InProcessOptions][])('%s equals the unsplit model', async (_name, split) => {
    const ref = await unsplit();
    const got = await trace(loadInProcessModel(bundled, { maxBatch: 8, ...split }));
    expect(got.tokens).toEqual(ref.tokens);
    for (let i = 0; i < ref.logits.length; i++) expect(maxAbsDiff(got.logits[i], ref.logits[i])).toBeLessThanOrEqual(1e-5);
  });
});
