/**
 * `pnpm bench:gpu`, smoke-sized: a tiny model (f16 and Q4_0), an 8-token prompt and a few decoded tokens,
 * Orchard's WebGPU shard against llama.cpp's Vulkan build on the same adapter (lavapipe here). Speeds are
 * never asserted; the lines, their units and ratio = Orchard / llama.cpp of the same run are. Skips with
 * the reason when node-llama-cpp or its Vulkan build is not installed (ORCHARD_REQUIRE_GPU_TESTS=1 keeps
 * that a skip: the oracle install is a separate step). The first run on a machine compiles llama.cpp's
 * Vulkan pipelines on the CPU (minutes on 2 cores); Mesa caches them in ~/.cache for later runs.
 */
import { describe, expect, it } from 'vitest';
import { runGpuBench } from '../../bench/gpu.js';
import { llamaCppMissingReason, llamaGpuBinariesMissingReason } from '../../bench/llama-cpp.js';
import { useLavapipe } from './gpu-env.js';

useLavapipe();
const missing = llamaCppMissingReason() ?? llamaGpuBinariesMissingReason(process.platform === 'darwin' ? 'metal' : 'vulkan');
const TINY = { name: 'orchard-bench-gpu-smoke-v1', hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, vocab: 320 };

describe.skipIf(missing !== null)(`bench:gpu smoke${missing ? ` (skipped: ${missing})` : ''}`, () => {
  it('prints decode/prefill lines per format with llama.cpp on the same adapter, and the per-token overhead lines', async () => {
    const r = await runGpuBench({ allowSoftware: true, model: TINY, dtypes: ['f16', 'q4_0'], promptTokens: 8, decodeTokens: 3, rounds: 1, attentionTokens: 24 });
    expect(r.skipped).toBeNull();
    expect(r.adapter).toBeTruthy();
    const names = r.lines.map((l) => l.name);
    expect(names).toEqual([
      'gpu-decode-f16',
      'gpu-prefill-f16',
      'gpu-decode-q4_0',
      'gpu-prefill-q4_0',
      'gpu-dispatches-decode',
      'gpu-submissions-decode',
      'gpu-record-decode',
      'gpu-submit-decode',
      'gpu-wait-decode',
      'gpu-dispatches-prefill',
      'gpu-round-trip',
      'gpu-attention-prefill',
    ]);
    for (const l of r.lines.filter((x) => /^gpu-(decode|prefill)-/.test(x.name))) {
      expect(l.unit).toBe('tok/s');
      expect(l.orchard).toBeGreaterThan(0);
      expect(l.llamacpp!).toBeGreaterThan(0);
      // 4 significant digits each, so the ratio agrees with the quotient to about 1e-3.
      expect(Math.abs(l.ratio! / (l.orchard / l.llamacpp!) - 1)).toBeLessThan(2e-3);
    }
    const byName = Object.fromEntries(r.lines.map((l) => [l.name, l]));
    // One submission per unsplit decode step, and every layer's kernels in it.
    expect(byName['gpu-submissions-decode'].orchard).toBe(1);
    expect(byName['gpu-dispatches-decode'].orchard).toBeGreaterThanOrEqual(2 * 4);
    for (const n of ['gpu-record-decode', 'gpu-submit-decode', 'gpu-wait-decode', 'gpu-round-trip']) expect(byName[n].orchard).toBeGreaterThan(0);
    // The prompt attention kernel's time at the given length, and its ratio to the per-token kernel's.
    const att = byName['gpu-attention-prefill'];
    expect(att.unit).toBe('ms/layer at 24 tokens (ratio: per-token kernel / tiled)');
    expect(att.orchard).toBeGreaterThan(0);
    expect(att.ratio!).toBeGreaterThan(0);
  }, 1_200_000);
});
