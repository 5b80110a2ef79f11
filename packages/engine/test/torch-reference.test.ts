/**
 * The forward pass against an independent PyTorch implementation of the Hugging Face modeling code
 * (test/torch_reference.py, float64, whole sequence, no KV cache). Runs where Debian's python3-torch
 * is installed (/usr/bin/python3, or ORCHARD_TORCH_PYTHON); skipped elsewhere, saying so.
 * It checks the maths the split-equivalence tests cannot: RoPE layout and scaling, GQA mapping,
 * biases, q/k norms, tied heads, expert routing (ties included: some variants give experts identical
 * router rows, so torch.topk's tie rule decides), latent attention with its compressed cache, and the KV
 * cache against full recomputation.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadInProcessModel } from '../src/index.js';
import { writeRandomModel, type RandomModelOptions } from '../src/testing/index.js';
import { argmaxOf, maxAbsDiff, tempDir } from './helpers.js';

const python = process.env.ORCHARD_TORCH_PYTHON ?? '/usr/bin/python3';
const hasTorch = spawnSync(python, ['-c', 'import torch, numpy'], { stdio: 'ignore' }).status === 0;
if (!hasTorch) console.warn(`torch-reference: skipped, ${python} has no torch/numpy (install Debian python3-torch)`);

const tmp = tempDir('torch');
afterAll(tmp.cleanup);

const VARIANTS: Record<string, RandomModelOptions> = {
  'llama GQA': { variant: 'llama' },
  'llama3 rope scaling': { variant: 'llama3' },
  'mistral, tied': { variant: 'mistral', tiedEmbeddings: true },
  'mistral sliding window 5': { variant: 'mistral', slidingWindow: 5 },
  'llama attention_bias (q/k/v/o)': { variant: 'llama', attentionBias: true },
  'qwen2 bias': { variant: 'qwen2' },
  'qwen3 q/k norm, head_dim ≠ hidden/heads': { variant: 'qwen3' },
  'llama bf16': { variant: 'llama', dtype: 'bf16' },
  'qwen3 f16, 2 files': { variant: 'qwen3', dtype: 'f16', shards: 2 },
  'qwen3-moe (layer 1 dense, top-2 renormalised)': { variant: 'qwen3-moe' },
  'qwen3-moe top-3 not renormalised, tied router rows': { variant: 'qwen3-moe', expertsPerToken: 3, normTopK: false, routerTies: true },
  'mixtral, sliding window 5': { variant: 'mixtral', slidingWindow: 5 },
  'mixtral bf16, tied router rows': { variant: 'mixtral', dtype: 'bf16', routerTies: true },
  'deepseek-v3 (MLA q_lora, yarn, grouped sigmoid routing, shared expert)': { variant: 'deepseek-v3' },
  'deepseek-v3 plain q_proj, tied router rows, 16 experts top-4': { variant: 'deepseek-v3', qLoraRank: null, routerTies: true, numExperts: 16, expertsPerToken: 4 },
  'kimi k2 layout (one expert group, yarn beta_fast 1), bf16': { variant: 'deepseek-v3', kimiLayout: true, dtype: 'bf16' },
  'gpt-oss (sinks, sliding/full layers, yarn, merged experts, clamped SwiGLU)': { variant: 'gpt-oss' },
  'gpt-oss bf16, tied router rows, top-3': { variant: 'gpt-oss', dtype: 'bf16', routerTies: true, expertsPerToken: 3 },
};

describe.skipIf(!hasTorch).each(Object.entries(VARIANTS))('%s vs PyTorch', (name, options) => {
  it('logits after the prompt and after each cached decode step match (abs ≤ 1e-4)', async () => {
    const dir = join(tmp.dir, name.replace(/[^a-z0-9]+/gi, '-'));
    writeRandomModel(dir, { seed: 17, numLayers: 3, ...options });
    const prompt = Array.from({ length: 19 }, (_, i) => (i * 71 + 3) % 256);
    const session = loadInProcessModel(dir, { maxBatch: 8 }).newSession(64);
    const ours: Float32Array[] = [Float32Array.from(await session.forward(prompt))];
    const seq = [...prompt];
    for (let i = 0; i < 6; i++) {
      seq.push(argmaxOf(ours[ours.length - 1]));
      ours.push(Float32Array.from(await session.forward([seq[seq.length - 1]])));
    }
    const out = execFileSync(python, [join(import.meta.dirname, 'torch_reference.py'), dir], {
      input: JSON.stringify({ ids: seq }),
      maxBuffer: 64 << 20,
    });
    const ref: number[][] = JSON.parse(out.toString()).logits;
    for (let i = 0; i < ours.length; i++) {
      const r = ref[prompt.length - 1 + i];
      expect(maxAbsDiff(ours[i], r)).toBeLessThanOrEqual(1e-4);
      expect(argmaxOf(r)).toBe(argmaxOf(ours[i]));
    }
  });
});
