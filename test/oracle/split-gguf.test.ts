/**
 * Split GGUF sets as llama.cpp reads them: a model written as NAME-0000i-of-0000N.gguf parts (by the
 * engine's writer, following gguf-split's layout) is opened by llama.cpp from its first part and gives
 * the same greedy tokens as the whole file does in llama.cpp, and as the engine gives from the same
 * set (F32 weights: both compute on the same values, as in oracle.test.ts). So the split layout the
 * engine reads is llama.cpp's, not only our writer's.
 *
 * Skips (saying why) when tools/llama-oracle is not installed; fails instead when ORCHARD_REQUIRE_ORACLE=1.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate, loadInProcessModel } from '@orchard/engine';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeRandomModel } from '@orchard/engine/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORACLE_REQUIRED, loadOracleModule, oracleMissingReason, type OracleModule } from './llama-oracle.js';

const GREEDY = 24;
const missing = oracleMissingReason();

describe('llama.cpp reads the split GGUF sets the engine reads', () => {
  if (missing && !ORACLE_REQUIRED) {
    it.skip(`skipped: ${missing}`, () => {});
    return;
  }
  let oracle: OracleModule;
  const work = mkdtempSync(join(tmpdir(), 'orchard-oracle-split-'));
  beforeAll(async () => {
    if (missing) throw new Error(`ORCHARD_REQUIRE_ORACLE=1 but ${missing}`);
    oracle = await loadOracleModule();
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  async function llamaGreedy(path: string, prompt: number[]): Promise<number[]> {
    const o = await oracle.openOracle(path, { threads: 1, contextSize: 64 });
    try {
      return await o.greedy(prompt, GREEDY);
    } finally {
      await o.dispose();
    }
  }

  for (const split of [{ maxTensors: 8 }, { maxTensors: 10, noTensorFirst: true }, { maxBytes: 100_000 }]) {
    it(`split ${JSON.stringify(split)}: llama.cpp and the engine give the whole file's tokens`, async () => {
      const dir = mkdtempSync(join(work, 'm-'));
      writeRandomModel(join(dir, 'hf'), { variant: 'llama', numHeads: 4, numKvHeads: 2, hiddenSize: 64, intermediateSize: 128, numLayers: 3, seed: 17 });
      mkdirSync(join(dir, 'whole'));
      mkdirSync(join(dir, 'set'));
      const whole = hfToGguf(join(dir, 'hf'), join(dir, 'whole/m.gguf'), { dtype: 'f32' });
      const set = hfToGguf(join(dir, 'hf'), join(dir, 'set/m.gguf'), { dtype: 'f32', split });
      expect(set.parts.length).toBeGreaterThan(2);
      const prompt = Array.from({ length: 20 }, (_, i) => (i * 37 + 11) % 256);

      const llamaWhole = await llamaGreedy(whole.path, prompt);
      const llamaSet = await llamaGreedy(set.path, prompt);
      const ours = await generate(loadInProcessModel(set.path), prompt, { temperature: 0, maxTokens: GREEDY, stopTokenIds: [] });
      console.log(`${set.parts.length} parts: llama.cpp ${JSON.stringify(llamaSet.slice(0, 8))}…, engine ${JSON.stringify(ours.tokens.slice(0, 8))}…`);
      expect(llamaSet).toEqual(llamaWhole);
      expect(ours.tokens).toEqual(llamaSet);
    });
  }
});
