/**
 * Expert routing rules on hand-made logits (each expected value worked out from the HF modeling code's
 * steps), and config.json errors for mixture-of-experts / latent-attention models.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadModelConfig, loadShard, ModelFormatError, UnsupportedModelError } from '../../src/index.js';
import type { MoeConfig } from '../../src/config/moe-config.js';
import { Router } from '../../src/model/routing.js';
import { writeRandomModel } from '../../src/testing/index.js';
import { tempDir } from '../helpers.js';

const tmp = tempDir('moe-routing');
afterAll(tmp.cleanup);

const base: MoeConfig = {
  experts: 8,
  topK: 2,
  expertIntermediate: 4,
  sharedIntermediate: 0,
  routing: 'softmax',
  activation: 'swiglu',
  normTopK: false,
  groups: 1,
  topkGroups: 1,
  scalingFactor: 1,
  swigluLimit: Infinity,
  sparse: [true],
};

function route(moe: Partial<MoeConfig>, logits: number[], correction: number[] | null = null): { ids: number[]; weights: number[] } {
  const m = { ...base, ...moe };
  const ids = new Int32Array(m.topK);
  const weights = new Float32Array(m.topK);
  new Router(m).route(Float32Array.from(logits), 0, ids, weights, 0, correction ? Float32Array.from(correction) : null);
  return { ids: Array.from(ids), weights: Array.from(weights) };
}

const softmax = (v: number[]) => {
  const m = Math.max(...v);
  const e = v.map((x) => Math.exp(x - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / s);
};

describe('routing', () => {
  const logits = [0.1, 2, -1, 1.5, 0.3, 0, 1.9, -2];

  it('softmax: top-k of the probabilities over all experts, renormalised only when asked', () => {
    const p = softmax(logits);
    const plain = route({}, logits);
    expect(plain.ids).toEqual([1, 6]);
    expect(plain.weights[0]).toBeCloseTo(p[1], 6);
    expect(plain.weights[1]).toBeCloseTo(p[6], 6);
    const norm = route({ normTopK: true }, logits);
    expect(norm.weights[0]).toBeCloseTo(p[1] / (p[1] + p[6]), 6);
    expect(norm.weights[0] + norm.weights[1]).toBeCloseTo(1, 6);
  });

  it('topk-softmax (gpt-oss): softmax over the chosen logits only', () => {
    const r = route({ routing: 'topk-softmax', topK: 3 }, logits);
    expect(r.ids).toEqual([1, 6, 3]);
    const p = softmax([2, 1.9, 1.5]);
    r.weights.forEach((w, j) => expect(w).toBeCloseTo(p[j], 6));
  });

  it('sigmoid-grouped (DeepSeek V3): groups ranked by their two best biased scores, weights from the unbiased scores × scaling', () => {
    const sig = (x: number) => 1 / (1 + Math.exp(-x));
    // 4 groups of 2: biased scores decide; expert 5's bias lifts group 2 above group 3.
    const bias = [0, 0, 0, 0, 0, 3, 0, 0];
    const r = route({ routing: 'sigmoid-grouped', groups: 4, topkGroups: 2, topK: 2, normTopK: true, scalingFactor: 2.5 }, logits, bias);
    // group sums: g0 = σ(.1)+σ(2), g1 = σ(-1)+σ(1.5), g2 = σ(.3)+σ(0)+3, g3 = σ(1.9)+σ(-2) → g2, g0 kept.
    expect(new Set(r.ids)).toEqual(new Set([5, 1]));
    const w5 = sig(0);
    const w1 = sig(2);
    const at = (e: number) => r.weights[r.ids.indexOf(e)];
    expect(at(5)).toBeCloseTo((w5 / (w5 + w1)) * 2.5, 5);
    expect(at(1)).toBeCloseTo((w1 / (w5 + w1)) * 2.5, 5);
  });

  it('sigmoid-grouped: experts of the dropped groups count as 0, as HF masked_fill does, so they win over negative biased scores', () => {
    // Kept groups hold only strongly negative biased scores; a dropped expert's 0 beats them.
    const bias = [-5, -5, 0, 0, -6, -6, -6, -6];
    const l = [0, 0, 9, 9, 0, 0, 0, 0]; // groups kept: 1 (experts 2, 3: ≈1 each) and 0 (−4.5 each)
    const r = route({ routing: 'sigmoid-grouped', groups: 4, topkGroups: 2, topK: 3 }, l, bias);
    expect(r.ids).toContain(2);
    expect(r.ids).toContain(3);
    // The third pick is a dropped group's expert (masked to 0.0), not kept group 0's −4.5.
    const third = r.ids.find((e) => e !== 2 && e !== 3)!;
    expect([4, 5, 6, 7]).toContain(third);
  });
});

describe('MoE config.json errors', () => {
  const dir = join(tmp.dir, 'q');
  writeRandomModel(dir, { variant: 'qwen3-moe', numLayers: 2 });
  const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  const withConfig = (patch: Record<string, unknown>) => {
    const d = join(tmp.dir, `c${Math.random().toString(36).slice(2)}`);
    writeRandomModel(d, { variant: 'qwen3-moe', numLayers: 2 });
    writeFileSync(join(d, 'config.json'), JSON.stringify({ ...config, ...patch }));
    return d;
  };

  it('names the field for bad expert counts and group layouts', () => {
    expect(() => loadModelConfig(withConfig({ num_experts_per_tok: 9 }))).toThrow(/num_experts_per_tok 9 exceeds num_experts 8/);
    expect(() => loadModelConfig(withConfig({ num_experts: 0 }))).toThrow(ModelFormatError);
    expect(() => loadModelConfig(withConfig({ mlp_only_layers: 'x' }))).toThrow(/mlp_only_layers must be an array of layer indices/);
    const ds = join(tmp.dir, 'ds');
    writeRandomModel(ds, { variant: 'deepseek-v3', numLayers: 2 });
    const dsc = JSON.parse(readFileSync(join(ds, 'config.json'), 'utf8'));
    writeFileSync(join(ds, 'config.json'), JSON.stringify({ ...dsc, n_group: 3 }));
    expect(() => loadModelConfig(ds)).toThrow(/8 routed experts do not divide into n_group 3 groups/);
    writeFileSync(join(ds, 'config.json'), JSON.stringify({ ...dsc, qk_rope_head_dim: undefined }));
    expect(() => loadModelConfig(ds)).toThrow(/qk_rope_head_dim must be a positive integer/);
    writeFileSync(join(ds, 'config.json'), JSON.stringify({ ...dsc, attention_bias: true }));
    expect(() => loadModelConfig(ds)).toThrow(UnsupportedModelError);
  });

  it('reads which layers are sparse', () => {
    expect(loadModelConfig(dir).moe!.sparse).toEqual([true, false]);
    expect(loadModelConfig(withConfig({ mlp_only_layers: [], decoder_sparse_step: 2 })).moe!.sparse).toEqual([false, true]);
  });

  it('refuses a tensor group larger than the expert count, and names a missing expert tensor', () => {
    expect(() => loadShard(dir, { layers: [0, 2], tensor: { rank: 0, size: 16 }, embed: true, head: true }, { allReduce: async () => {} })).toThrow(UnsupportedModelError);
    const few = join(tmp.dir, 'few');
    writeRandomModel(few, { variant: 'qwen3-moe', numLayers: 2, numExperts: 2, numHeads: 4 });
    expect(() => loadShard(few, { layers: [0, 2], tensor: { rank: 0, size: 4 }, embed: true, head: true }, { allReduce: async () => {} })).toThrow(/cannot split 2 experts over 4 tensor ranks/);
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, num_experts: 9 }));
    expect(() => loadShard(dir, { layers: [0, 1], tensor: { rank: 0, size: 1 }, embed: true, head: false })).toThrow(/model\.layers\.0\.mlp\.(gate\.weight has shape \[8,64\], expected \[9,64\]|experts\.8)/);
  });
});
