/**
 * Tensor and pipeline splits of K-quant GGUFs (Q4_K_M: Q4_K and Q6_K matrices) without requantizing:
 * row slices (q/k/v, gate/up, head) and column slices (o_proj, down_proj) on 256-weight super-block
 * boundaries give the unsplit logits on the reference backend (≤ 1e-4), and the unsplit greedy tokens on
 * the WASM kernels (whose 8-bit activations make a different f32 summation order of a column split's
 * partial sums visible as ≤ 1e-3 in the logits). A split inside a super-block is refused with the numbers.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createReferenceBackend, createWasmBackend, generate, loadInProcessModel, loadShard, UnsupportedModelError, type Backend } from '@orchard/engine';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeRandomModel } from '@orchard/engine/testing';

const work = mkdtempSync(join(tmpdir(), 'orchard-ksplit-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const TOKENS = [3, 141, 59, 26, 53, 58, 97, 93];

async function run(path: string, backend: () => Backend, split: { tensor?: number; pipeline?: number } = {}, greedy = 0) {
  const m = loadInProcessModel(path, { backend, ...split });
  try {
    const logits = Float32Array.from(await m.newSession().forward(TOKENS));
    const tokens = greedy ? (await generate(m, TOKENS, { maxTokens: greedy, temperature: 0, stopTokenIds: [] })).tokens : [];
    return { logits, tokens };
  } finally {
    m.dispose();
  }
}
const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

describe('K-quant splits', () => {
  it('Q4_K_M: TP-2, PP-2 and TP-2 × PP-2 equal the unsplit model (reference logits, WASM greedy tokens)', async () => {
    const dir = join(work, 'hf');
    writeRandomModel(dir, { variant: 'llama', hiddenSize: 512, intermediateSize: 1024, numHeads: 8, numKvHeads: 4, numLayers: 2, seed: 5 });
    const path = join(work, 'q4_k_m.gguf');
    hfToGguf(dir, path, { dtype: 'q4_k_m' });
    const whole = await run(path, createReferenceBackend);
    for (const split of [{ tensor: 2 }, { pipeline: 2 }, { tensor: 2, pipeline: 2 }]) {
      const r = await run(path, createReferenceBackend, split);
      expect(maxDiff(r.logits, whole.logits), JSON.stringify(split)).toBeLessThan(1e-4);
    }
    const wasm = () => createWasmBackend({ threads: 1 });
    const wholeWasm = await run(path, wasm, {}, 24);
    for (const split of [{ tensor: 2 }, { pipeline: 2 }, { tensor: 2, pipeline: 2 }]) {
      const r = await run(path, wasm, split, 24);
      expect(maxDiff(r.logits, wholeWasm.logits), JSON.stringify(split)).toBeLessThan(1e-3);
      expect(r.tokens, JSON.stringify(split)).toEqual(wholeWasm.tokens);
    }
  }, 120_000);

  it('refuses a column split inside a 256-weight super-block, naming tensor, columns and block size', () => {
    const dir = join(work, 'small');
    writeRandomModel(dir, { variant: 'llama', hiddenSize: 256, intermediateSize: 512, numHeads: 4, numKvHeads: 2, numLayers: 1, seed: 6 });
    const path = join(work, 'small-q4_k_m.gguf');
    hfToGguf(dir, path, { dtype: 'q4_k_m' });
    // 4 heads of 64: rank 1 of 2 holds o_proj columns [128, 256), half a super-block
    const load = () => loadShard(path, { layers: [0, 1], tensor: { rank: 1, size: 2 }, embed: false, head: false }, { allReduce: async () => {}, backend: createReferenceBackend() });
    expect(load).toThrow(UnsupportedModelError);
    expect(load).toThrow(/small-q4_k_m\.gguf: cannot split model\.layers\.0\.self_attn\.o_proj\.weight \(q4_k\) at columns \[128, 256\).*256-element block/);
  });
});
