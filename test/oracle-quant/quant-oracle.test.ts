/**
 * Issue 7, quantized proof: Orchard loading a Q8_0 / Q4_0 GGUF (written by our converter with ggml's
 * reference quantizers) against llama.cpp (node-llama-cpp 3.21.1, CPU) on the very same file.
 * - Q8_0: 32 greedy tokens identical (WASM backend, whose kernels quantize activations per block as
 *   llama.cpp's x86 build does), and next-token probabilities within PROB_TOLERANCE.
 * - Q4_0: next-token probabilities within PROB_TOLERANCE on both backends (DEMO_PROB_TOLERANCE on the
 *   trained demo model; see there). Greedy tokens are not
 *   required: on arch llama with GQA, llama.cpp's prompt batch differs from ours by up to ~1e-3 in
 *   probability (measured; qwen2/qwen3 agree to ~1e-8), enough to flip a near-tie on random weights.
 * - The reference backend (f32 activations, exact dequantized weights) within PROB_TOLERANCE too.
 *
 * Skips (saying why) when tools/llama-oracle is not installed, fails when ORCHARD_REQUIRE_ORACLE=1.
 * The demo model (models/orchard-demo) case skips while that directory is not committed.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createReferenceBackend, createWasmBackend, generate, loadInProcessModel, type Backend } from '@orchard/engine';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeRandomModel, type RandomModelOptions } from '@orchard/engine/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORACLE_REQUIRED, REPO_ROOT, loadOracleModule, oracleMissingReason, type OracleModule } from '../oracle/llama-oracle.js';
import { softmax } from '../oracle/compare.js';

const PROB_TOLERANCE = 2e-3;
/**
 * The trained demo model is sharper than random weights, and quantized activations are discontinuous:
 * a float-order difference of ~1e-6 upstream (RoPE, attention sums) can flip one int8 rounding of an
 * activation block and move a probability by ~1e-3. Measured on the demo (per position, 59-token
 * prompt): Q8_0 on the WASM backend equals llama.cpp to ~1e-7 through position 31 and drifts to
 * 2.3e-3 at 39; Q4_0 reaches 5.3e-3 at 31; the reference backend (f32 activations, so it cannot follow
 * llama.cpp's int8 rounding at all) differs by up to 9.9e-3 (Q8_0) and 4.7e-3 (Q4_0). Hence 1e-2 here,
 * with Q8_0 greedy tokens still required to be identical.
 */
const DEMO_PROB_TOLERANCE = 1e-2;
const GREEDY_TOKENS = 32;
const missing = oracleMissingReason();
const DEMO = join(REPO_ROOT, 'models/orchard-demo');

interface Result {
  maxProbDiff: number;
  maxProb: number;
  orchardGreedy: number[];
  llamaGreedy: number[];
}

/** Orchard (on `backend`) vs llama.cpp on one GGUF: probabilities after each of `positions`, and greedy tokens. */
async function compare(oracle: OracleModule, gguf: string, prompt: number[], positions: number[], backend: () => Backend): Promise<Result> {
  const o = await oracle.openOracle(gguf, { threads: 1, contextSize: Math.max(64, prompt.length + GREEDY_TOKENS) });
  let llamaProbs: Float32Array[];
  let llamaGreedy: number[];
  try {
    llamaProbs = await o.nextTokenProbabilities(prompt, positions);
    llamaGreedy = await o.greedy(prompt, GREEDY_TOKENS);
  } finally {
    await o.dispose();
  }
  const model = loadInProcessModel(gguf, { backend });
  try {
    const session = model.newSession(prompt.length + 1);
    let fed = 0;
    let maxProbDiff = 0;
    let maxProb = 0;
    for (const [k, p] of positions.entries()) {
      const probs = softmax(await session.forward(prompt.slice(fed, p + 1)));
      fed = p + 1;
      for (let i = 0; i < probs.length; i++) {
        maxProbDiff = Math.max(maxProbDiff, Math.abs(probs[i] - llamaProbs[k][i]));
        maxProb = Math.max(maxProb, llamaProbs[k][i]);
      }
    }
    const r = await generate(model, prompt, { maxTokens: GREEDY_TOKENS, temperature: 0, stopTokenIds: [] });
    return { maxProbDiff, maxProb, orchardGreedy: r.tokens, llamaGreedy };
  } finally {
    model.dispose();
  }
}

const wasm = () => createWasmBackend({ threads: 1 });

describe('quantized GGUF vs llama.cpp', () => {
  if (missing && !ORACLE_REQUIRED) {
    it.skip(`skipped: ${missing}`, () => {});
    return;
  }
  let oracle: OracleModule;
  const work = mkdtempSync(join(tmpdir(), 'orchard-oracle-quant-'));
  beforeAll(async () => {
    if (missing) throw new Error(`ORCHARD_REQUIRE_ORACLE=1 but ${missing}`);
    oracle = await loadOracleModule();
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  const demoIt = existsSync(join(DEMO, 'config.json')) ? it : it.skip;
  demoIt(`demo model${existsSync(join(DEMO, 'config.json')) ? '' : ' (skipped: models/orchard-demo is not committed yet)'}: Q8_0 greedy identical, Q4_0 probabilities within tolerance`, async () => {
    const prompt = [...Buffer.from('In the beginning God created the heaven and the earth. And ', 'utf8')];
    const positions = [0, 5, 31, 32, prompt.length - 1];
    for (const dtype of ['q8_0', 'q4_0'] as const) {
      const gguf = join(work, `demo-${dtype}.gguf`);
      hfToGguf(DEMO, gguf, { dtype });
      const r = await compare(oracle, gguf, prompt, positions, wasm);
      console.log(`demo ${dtype}: max |Δp| = ${r.maxProbDiff.toExponential(2)}, greedy ${JSON.stringify(Buffer.from(r.orchardGreedy).toString('utf8'))}`);
      expect(r.maxProbDiff).toBeLessThanOrEqual(DEMO_PROB_TOLERANCE);
      if (dtype === 'q8_0') expect(r.orchardGreedy).toEqual(r.llamaGreedy);
    }
  });

  const variants: { name: string; options: RandomModelOptions }[] = [
    { name: 'llama (GQA 4/2)', options: { variant: 'llama', numHeads: 4, numKvHeads: 2 } },
    { name: 'qwen2 (q/k/v bias, tied)', options: { variant: 'qwen2', tiedEmbeddings: true } },
    { name: 'qwen3 (q/k norm)', options: { variant: 'qwen3' } },
  ];
  // K-quant mixes as llama-quantize writes them (kQuantMix): rows of whole 256-blocks, so hidden 256
  // and FFN 512; every matrix Q4_K/Q5_K/Q6_K (attn_v, ffn_down and the head Q6_K per the mix).
  const kVariants: { name: string; options: RandomModelOptions }[] = [
    { name: 'llama (GQA 4/2)', options: { variant: 'llama', numHeads: 4, numKvHeads: 2 } },
    { name: 'qwen2 (q/k/v bias, tied)', options: { variant: 'qwen2', tiedEmbeddings: true } },
    { name: 'qwen3 (q/k norm)', options: { variant: 'qwen3' } },
  ];
  for (const { name, options } of kVariants) {
    it(`random ${name}: Q4_K_M, Q5_K_M, Q6_K greedy identical for ${GREEDY_TOKENS} tokens, probabilities within ${PROB_TOLERANCE}`, async () => {
      const dir = mkdtempSync(join(work, 'kmodel-'));
      writeRandomModel(join(dir, 'hf'), { hiddenSize: 256, intermediateSize: 512, numLayers: 3, seed: 11, ...options });
      const prompt = Array.from({ length: 40 }, (_, i) => (i * 37 + 11) % 256);
      const positions = [0, 17, 31, 32, 39];
      for (const dtype of ['q4_k_m', 'q5_k_m', 'q6_k'] as const) {
        const gguf = join(dir, `${dtype}.gguf`);
        hfToGguf(join(dir, 'hf'), gguf, { dtype });
        const r = await compare(oracle, gguf, prompt, positions, wasm);
        console.log(`${name} ${dtype} (wasm): max |Δp| = ${r.maxProbDiff.toExponential(2)}, top p = ${r.maxProb.toFixed(3)}, greedy ${JSON.stringify(r.orchardGreedy) === JSON.stringify(r.llamaGreedy) ? 'identical' : 'differs'}`);
        expect(r.maxProbDiff).toBeLessThanOrEqual(PROB_TOLERANCE);
        expect(r.orchardGreedy).toHaveLength(GREEDY_TOKENS);
        expect(r.orchardGreedy).toEqual(r.llamaGreedy);
        const ref = await compare(oracle, gguf, prompt, [39], createReferenceBackend);
        console.log(`${name} ${dtype} (reference): max |Δp| = ${ref.maxProbDiff.toExponential(2)}`);
        expect(ref.maxProbDiff).toBeLessThanOrEqual(PROB_TOLERANCE);
      }
    }, 300_000);
  }

  // MXFP4 (gpt-oss's expert format) on a dense model: every layer matrix MXFP4, token_embd/output Q8_0.
  for (const { name, options } of variants) {
    it(`random ${name}: MXFP4 greedy identical for ${GREEDY_TOKENS} tokens, probabilities within ${PROB_TOLERANCE}`, async () => {
      const dir = mkdtempSync(join(work, 'fp4model-'));
      writeRandomModel(join(dir, 'hf'), { hiddenSize: 128, intermediateSize: 256, numLayers: 3, seed: 7, ...options });
      const prompt = Array.from({ length: 40 }, (_, i) => (i * 37 + 11) % 256);
      const gguf = join(dir, 'mxfp4.gguf');
      const written = hfToGguf(join(dir, 'hf'), gguf, { dtype: 'mxfp4' });
      expect(written.tensors.filter((t) => t.type === 'MXFP4')).toHaveLength(3 * 7);
      const r = await compare(oracle, gguf, prompt, [0, 17, 31, 32, 39], wasm);
      console.log(`${name} mxfp4 (wasm): max |Δp| = ${r.maxProbDiff.toExponential(2)}, top p = ${r.maxProb.toFixed(3)}`);
      expect(r.maxProbDiff).toBeLessThanOrEqual(PROB_TOLERANCE);
      expect(r.orchardGreedy).toHaveLength(GREEDY_TOKENS);
      expect(r.orchardGreedy).toEqual(r.llamaGreedy);
      const ref = await compare(oracle, gguf, prompt, [39], createReferenceBackend);
      console.log(`${name} mxfp4 (reference): max |Δp| = ${ref.maxProbDiff.toExponential(2)}`);
      expect(ref.maxProbDiff).toBeLessThanOrEqual(PROB_TOLERANCE);
    }, 180_000);
  }

  for (const { name, options } of variants) {
    it(`random ${name}: Q8_0 greedy identical for ${GREEDY_TOKENS} tokens, Q4_0 within ${PROB_TOLERANCE}`, async () => {
      const dir = mkdtempSync(join(work, 'model-'));
      writeRandomModel(join(dir, 'hf'), { hiddenSize: 128, intermediateSize: 256, numLayers: 3, seed: 7, ...options });
      const prompt = Array.from({ length: 40 }, (_, i) => (i * 37 + 11) % 256);
      const positions = [0, 17, 31, 32, 39];
      for (const dtype of ['q8_0', 'q4_0'] as const) {
        const gguf = join(dir, `${dtype}.gguf`);
        hfToGguf(join(dir, 'hf'), gguf, { dtype });
        const r = await compare(oracle, gguf, prompt, positions, wasm);
        console.log(`${name} ${dtype} (wasm): max |Δp| = ${r.maxProbDiff.toExponential(2)}, top p = ${r.maxProb.toFixed(3)}`);
        expect(r.maxProbDiff).toBeLessThanOrEqual(PROB_TOLERANCE);
        if (dtype === 'q8_0') {
          expect(r.orchardGreedy).toHaveLength(GREEDY_TOKENS);
          expect(r.orchardGreedy).toEqual(r.llamaGreedy);
        }
        const ref = await compare(oracle, gguf, prompt, [39], createReferenceBackend);
        console.log(`${name} ${dtype} (reference): max |Δp| = ${ref.maxProbDiff.toExponential(2)}`);
        expect(ref.maxProbDiff).toBeLessThanOrEqual(PROB_TOLERANCE);
      }
    });
  }
});
