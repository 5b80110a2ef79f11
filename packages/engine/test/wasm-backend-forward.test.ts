/**
 * The forward pass on the WASM backend (its matmul, attention and swiglu kernels) against the
 * reference backend: same logits within f32 reordering error, same greedy tokens, also tensor-split.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createWasmBackend, loadInProcessModel, type InProcessModel, type InProcessOptions } from '../src/index.js';
import { writeRandomModel, type RandomModelOptions } from '../src/testing/index.js';
import { argmaxOf, maxAbsDiff, tempDir } from './helpers.js';

const tmp = tempDir('wasm-forward');
const models: InProcessModel[] = [];
afterAll(() => {
  models.forEach((m) => m.dispose());
  tmp.cleanup();
});

const CASES: [string, RandomModelOptions, InProcessOptions][] = [
  ['llama3 f16', { variant: 'llama3', dtype: 'f16' }, {}],
  ['qwen3 bf16, tensor 2', { variant: 'qwen3', dtype: 'bf16' }, { tensor: 2 }],
  ['mistral sliding window f32, pipeline 2 × tensor 4', { variant: 'mistral', slidingWindow: 7, numKvHeads: 1 }, { pipeline: 2, tensor: 4 }],
  ['qwen3-moe f16, experts over tensor 2', { variant: 'qwen3-moe', dtype: 'f16' }, { tensor: 2 }],
  ['mixtral bf16', { variant: 'mixtral', dtype: 'bf16' }, {}],
  ['deepseek-v3 f16 (MLA), pipeline 2 × tensor 2', { variant: 'deepseek-v3', dtype: 'f16' }, { pipeline: 2, tensor: 2 }],
  ['gpt-oss f16 (sinks, merged experts), tensor 2', { variant: 'gpt-oss', dtype: 'f16' }, { tensor: 2 }],
];

describe.each(CASES)('%s on the wasm backend', (name, modelOptions, split) => {
  it('matches the reference backend (logits ≤ 1e-4, same greedy tokens)', async () => {
    const dir = join(tmp.dir, name.replace(/[^a-z0-9]+/gi, '-'));
    writeRandomModel(dir, { seed: 23, ...modelOptions });
    const prompt = Array.from({ length: 20 }, (_, i) => (i * 29 + 5) % 256);
    const run = async (m: InProcessModel) => {
      models.push(m);
      const s = m.newSession(48);
      const logits = [Float32Array.from(await s.forward(prompt))];
      const tokens: number[] = [];
      for (let i = 0; i < 10; i++) {
        tokens.push(argmaxOf(logits[i]));
        logits.push(Float32Array.from(await s.forward([tokens[i]])));
      }
      s.dispose?.();
      return { logits, tokens };
    };
    const ref = await run(loadInProcessModel(dir, { maxBatch: 8 }));
    const wasm = await run(loadInProcessModel(dir, { maxBatch: 8, ...split, backend: () => createWasmBackend({ threads: 1 }) }));
    expect(wasm.tokens).toEqual(ref.tokens);
    for (let i = 0; i < ref.logits.length; i++) expect(maxAbsDiff(wasm.logits[i], ref.logits[i])).toBeLessThanOrEqual(1e-4);
  });
});
