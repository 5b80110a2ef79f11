/**
 * The engine's forward pass on the WASM backend against the same pass on the reference backend:
 * random models in HF layout (f32/f16/bf16, GQA, Qwen3 q/k norms), a prompt run as one batch (matmul)
 * then token-by-token decode (matvec), 2 threads with every kernel shared.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createReferenceBackend, loadShard } from '../../src/index.js';
import { createWasmBackend, type WasmBackend } from '../../src/kernels/wasm/backend.js';
import { writeRandomModel, type RandomModelDType, type RandomModelVariant } from '../../src/testing/index.js';

const root = mkdtempSync(join(tmpdir(), 'orchard-wasm-forward-'));
const backends: WasmBackend[] = [];
afterAll(() => {
  backends.forEach((b) => b.dispose());
  rmSync(root, { recursive: true, force: true });
});

function argmax(v: Float32Array): number {
  let best = 0;
  for (let i = 1; i < v.length; i++) if (v[i] > v[best]) best = i;
  return best;
}

const cases: Array<[RandomModelVariant, RandomModelDType]> = [
  ['llama', 'f32'],
  ['llama', 'f16'],
  ['qwen3', 'bf16'],
];

describe('forward pass on the wasm backend', () => {
  it.each(cases)('%s %s: logits match the reference backend and greedy tokens agree', async (variant, dtype) => {
    const dir = join(root, `${variant}-${dtype}`);
    writeRandomModel(dir, { variant, dtype, seed: 7, hiddenSize: 64, intermediateSize: 136, numLayers: 2 });
    const spec = { layers: [0, 2] as [number, number], tensor: { rank: 0, size: 1 }, embed: true, head: true };
    const wasm = createWasmBackend({ threads: 2, parallelThreshold: 0 });
    backends.push(wasm);
    const ref = loadShard(dir, spec, { backend: createReferenceBackend(), maxSeqLen: 64 });
    const fast = loadShard(dir, spec, { backend: wasm, maxSeqLen: 64 });
    const refCache = ref.newCache();
    const fastCache = fast.newCache();
    const prompt = [72, 101, 108, 108, 111, 44, 32];
    let a = (await ref.forward({ tokens: prompt }, refCache)).slice();
    let b = await fast.forward({ tokens: prompt }, fastCache);
    for (let step = 0; step < 8; step++) {
      let scale = 0;
      for (const v of a) scale = Math.max(scale, Math.abs(v));
      let diff = 0;
      for (let i = 0; i < a.length; i++) diff = Math.max(diff, Math.abs(a[i] - b[i]));
      // Only f32 summation order differs (matmul kernels): 2e-5 of the largest logit (seen: ~3e-7).
      expect(diff, `step ${step}`).toBeLessThanOrEqual(2e-5 * scale);
      const next = argmax(a);
      expect(argmax(b), `greedy token at step ${step}`).toBe(next);
      a = (await ref.forward({ tokens: [next] }, refCache)).slice();
      b = await fast.forward({ tokens: [next] }, fastCache);
    }
  });
});
