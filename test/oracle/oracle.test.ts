/**
 * Proof 2 of issue 2: llama.cpp (node-llama-cpp 3.21.1, CPU) on the same weights, written to GGUF by
 * our own writer, agrees with the engine: next-token probabilities within 2e-3 and 64 greedy tokens
 * identical — on the bundled demo model and on random models of each variant llama.cpp supports.
 *
 * Skips (saying why) when tools/llama-oracle is not installed; fails instead when
 * ORCHARD_REQUIRE_ORACLE=1, which .ci/run sets after installing it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeRandomModel, type RandomModelOptions } from '@orchard/engine/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareWithOracle } from './compare.js';
import { ORACLE_REQUIRED, REPO_ROOT, loadOracleModule, oracleMissingReason, type OracleModule } from './llama-oracle.js';

const PROB_TOLERANCE = 2e-3;
const GREEDY_TOKENS = 64;
const missing = oracleMissingReason();

describe('llama.cpp oracle', () => {
  if (missing && !ORACLE_REQUIRED) {
    it.skip(`skipped: ${missing}`, () => {});
    return;
  }

  let oracle: OracleModule;
  const work = mkdtempSync(join(tmpdir(), 'orchard-oracle-'));
  beforeAll(async () => {
    if (missing) throw new Error(`ORCHARD_REQUIRE_ORACLE=1 but ${missing}`);
    oracle = await loadOracleModule();
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('bundled demo model (models/orchard-demo) agrees with llama.cpp', async () => {
    const prompt = [...Buffer.from('In the beginning God created the heaven and the earth. And ', 'utf8')];
    const r = await compareWithOracle(oracle, join(REPO_ROOT, 'models/orchard-demo'), mkdtempSync(join(work, 'demo-')), prompt, {
      greedyTokens: GREEDY_TOKENS,
      positions: [0, 5, 31, 32, prompt.length - 1],
    });
    console.log(`demo model: max |Δp| = ${r.maxProbDiff.toExponential(2)}, greedy: ${JSON.stringify(Buffer.from(r.engineGreedy).toString('utf8'))}`);
    expect(r.maxProbDiff).toBeLessThanOrEqual(PROB_TOLERANCE);
    expect(r.engineGreedy).toHaveLength(GREEDY_TOKENS);
    expect(r.engineGreedy).toEqual(r.oracleGreedy);
  });

  // Small random models of every variant llama.cpp runs (Mistral maps to arch llama).
  const variants: { name: string; options: RandomModelOptions }[] = [
    { name: 'llama (GQA 4/2)', options: { variant: 'llama', numHeads: 4, numKvHeads: 2 } },
    { name: 'llama3 rope scaling, tied embeddings', options: { variant: 'llama3', tiedEmbeddings: true } },
    { name: 'mistral (GQA 4/1)', options: { variant: 'mistral', numHeads: 4, numKvHeads: 1 } },
    { name: 'qwen2 (q/k/v bias, tied)', options: { variant: 'qwen2', tiedEmbeddings: true } },
    { name: 'qwen3 (q/k norm, head_dim 32)', options: { variant: 'qwen3' } },
    { name: 'llama f16 weights', options: { variant: 'llama', dtype: 'f16', numKvHeads: 4 } },
  ];
  for (const { name, options } of variants) {
    it(`random ${name} agrees with llama.cpp`, async () => {
      const dir = mkdtempSync(join(work, 'model-'));
      writeRandomModel(join(dir, 'hf'), { hiddenSize: 64, intermediateSize: 128, numLayers: 3, seed: 11, ...options });
      // 40 prompt tokens: more than one prompt batch (32), and 40 + 64 generated crosses the llama3
      // variant's original context (64), so every band of its rope scaling is used.
      const prompt = Array.from({ length: 40 }, (_, i) => (i * 37 + 11) % 256);
      const r = await compareWithOracle(oracle, join(dir, 'hf'), dir, prompt, { greedyTokens: GREEDY_TOKENS, positions: [0, 17, 31, 32, 39] });
      console.log(`${name}: max |Δp| = ${r.maxProbDiff.toExponential(2)}, top p = ${r.maxProb.toFixed(3)}`);
      expect(r.maxProbDiff).toBeLessThanOrEqual(PROB_TOLERANCE);
      expect(r.engineGreedy).toHaveLength(GREEDY_TOKENS);
      expect(r.engineGreedy).toEqual(r.oracleGreedy);
    });
  }
});
