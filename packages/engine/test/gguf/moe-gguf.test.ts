/**
 * GGUF read and write of the mixture-of-experts / latent-attention architectures, in llama.cpp's
 * layouts (stacked expert tensors, deepseek2's split attn_k_b / attn_v_b, gpt-oss's split gate/up):
 * a model written by hfToGguf and read back runs the same function as its HF directory; one expert of
 * a stacked tensor is read alone (a tensor rank reads only its experts' bytes); Q8_0 experts stay in
 * their blocks; what llama.cpp cannot state is refused on export.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hfToGguf } from '../../src/gguf/index.js';
import { readGgufFile } from '../../src/gguf/read-split.js';
import { loadInProcessModel, loadModelConfig, loadShard, UnsupportedModelError, type LanguageModel } from '../../src/index.js';
import type { MoeWeights } from '../../src/model/weights.js';
import { writeRandomModel, type RandomModelOptions } from '../../src/testing/index.js';
import { argmaxOf, maxAbsDiff, tempDir } from '../helpers.js';

const tmp = tempDir('moe-gguf');
afterAll(tmp.cleanup);

const PROMPT = Array.from({ length: 19 }, (_, i) => (i * 41 + 9) % 256);

async function trace(model: LanguageModel): Promise<{ logits: Float32Array[]; tokens: number[] }> {
  const s = model.newSession(48);
  const logits = [Float32Array.from(await s.forward(PROMPT))];
  const tokens: number[] = [];
  for (let i = 0; i < 5; i++) {
    tokens.push(argmaxOf(logits[i]));
    logits.push(Float32Array.from(await s.forward([tokens[i]])));
  }
  return { logits, tokens };
}

const VARIANTS: Record<string, { options: RandomModelOptions; arch: string; expertTensor: string }> = {
  qwen3moe: { options: { variant: 'qwen3-moe', mlpOnlyLayers: [] }, arch: 'qwen3moe', expertTensor: 'blk.1.ffn_gate_exps.weight' },
  'mixtral (llama with experts)': { options: { variant: 'mixtral' }, arch: 'llama', expertTensor: 'blk.1.ffn_down_exps.weight' },
  'deepseek2 (MLA, shared expert)': { options: { variant: 'deepseek-v3' }, arch: 'deepseek2', expertTensor: 'blk.1.ffn_up_exps.weight' },
  'deepseek2 plain q_proj': { options: { variant: 'deepseek-v3', qLoraRank: null }, arch: 'deepseek2', expertTensor: 'blk.2.ffn_gate_exps.weight' },
  'gpt-oss (merged experts split, sinks)': { options: { variant: 'gpt-oss' }, arch: 'gpt-oss', expertTensor: 'blk.0.ffn_gate_exps.bias' },
};

describe.each(Object.entries(VARIANTS))('%s through GGUF', (name, { options, arch, expertTensor }) => {
  const dir = join(tmp.dir, name.replace(/[^a-z0-9]+/gi, '-'));
  const info = writeRandomModel(dir, { seed: 21, numLayers: 3, ...options });
  if (arch === 'gpt-oss') {
    // llama.cpp's yarn always rounds the correction range (HF gpt-oss says truncate: false); the round
    // trip compares like with like.
    const config = { ...info.config, rope_scaling: { ...(info.config.rope_scaling as object), truncate: true } };
    writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  }
  const gguf = join(dir, 'model.gguf');
  hfToGguf(dir, gguf, { dtype: 'f32' });

  it('is written in llama.cpp’s layout and read back as the same architecture', () => {
    const h = readGgufFile(gguf);
    expect(h.metadata.get('general.architecture')).toBe(arch);
    const t = h.tensors.get(expertTensor)!;
    expect(t.shape[0]).toBe(8); // stacked: one slab per expert
    const hf = loadModelConfig(dir);
    const back = loadModelConfig(gguf);
    expect(back.architecture).toBe(hf.architecture);
    expect(back.moe).toEqual(hf.moe);
    // f32 metadata rounds the yarn factor a little: the softmax scale to f32 precision, the rest exactly.
    expect(back.mla && { ...back.mla, softmaxScale: 0 }).toEqual(hf.mla && { ...hf.mla, softmaxScale: 0 });
    if (hf.mla) expect(back.mla!.softmaxScale).toBeCloseTo(hf.mla.softmaxScale, 6);
  });

  it('runs the same function as the HF directory (logits ≤ 1e-5, same greedy tokens), also split by experts', async () => {
    const want = await trace(loadInProcessModel(dir, { maxBatch: 8 }));
    for (const split of [{}, { tensor: 2 }]) {
      const got = await trace(loadInProcessModel(gguf, { maxBatch: 8, ...split }));
      expect(got.tokens).toEqual(want.tokens);
      for (let i = 0; i < want.logits.length; i++) expect(maxAbsDiff(got.logits[i], want.logits[i])).toBeLessThanOrEqual(1e-5);
    }
  });
});

describe('expert slabs of a stacked GGUF tensor', () => {
  const dir = join(tmp.dir, 'q8');
  writeRandomModel(dir, { variant: 'qwen3-moe', mlpOnlyLayers: [], seed: 5, numLayers: 2, moeIntermediateSize: 64 });
  const gguf = join(dir, 'model-q8_0.gguf');
  hfToGguf(dir, gguf, { dtype: 'q8_0' });
  const all = { layers: [0, 2] as [number, number], embed: true, head: true };

  it('a tensor rank reads only its experts: half the expert bytes each, in q8_0 blocks', () => {
    const h = readGgufFile(gguf);
    const experts = [...h.tensors.values()].filter((t) => /_exps\.weight$/.test(t.name)).reduce((s, t) => s + t.bytes, 0);
    const whole = loadShard(gguf, { ...all, tensor: { rank: 0, size: 1 } });
    const ranks = [0, 1].map((rank) => loadShard(gguf, { ...all, tensor: { rank, size: 2 } }, { allReduce: async () => {} }));
    const expertBytes = (s: typeof whole) =>
      s.weights.layers.reduce((n, L) => n + (L.mlp as MoeWeights).experts.reduce((m, e) => m + e.gate.bytes.byteLength + e.up.bytes.byteLength + e.down.bytes.byteLength, 0), 0);
    expect(expertBytes(whole)).toBe(experts);
    for (const r of ranks) expect(expertBytes(r)).toBe(experts / 2);
    expect((ranks[0].weights.layers[0].mlp as MoeWeights).experts[0].gate.dtype).toBe('q8_0');
    // Everything else is shared or split: the two ranks together read the experts once.
    const others = whole.bytesRead - experts;
    for (const r of ranks) expect((r.bytesRead - experts / 2) / others).toBeLessThan(1.05);
  });

  it('q8_0 experts run: the GGUF split by experts equals the GGUF unsplit', async () => {
    const want = await trace(loadInProcessModel(gguf, { maxBatch: 8 }));
    const got = await trace(loadInProcessModel(gguf, { maxBatch: 8, tensor: 2 }));
    expect(got.tokens).toEqual(want.tokens);
    for (let i = 0; i < want.logits.length; i++) expect(maxAbsDiff(got.logits[i], want.logits[i])).toBeLessThanOrEqual(1e-5);
  });
});

describe('GGUF export refusals', () => {
  it('names what llama.cpp cannot state', () => {
    const dense = join(tmp.dir, 'dense-layer');
    writeRandomModel(dense, { variant: 'qwen3-moe', mlpOnlyLayers: [1], numLayers: 2 });
    expect(() => hfToGguf(dense, join(dense, 'x.gguf'))).toThrow(/a dense layer among MoE layers .* not expressed for llama.cpp arch qwen3moe/);
    const plain = join(tmp.dir, 'no-norm');
    writeRandomModel(plain, { variant: 'qwen3-moe', mlpOnlyLayers: [], normTopK: false, numLayers: 2 });
    expect(() => hfToGguf(plain, join(plain, 'x.gguf'))).toThrow(UnsupportedModelError);
    const ds = join(tmp.dir, 'freq');
    writeRandomModel(ds, { variant: 'deepseek-v3', numLayers: 4 });
    const c = JSON.parse(readFileSync(join(ds, 'config.json'), 'utf8'));
    writeFileSync(join(ds, 'config.json'), JSON.stringify({ ...c, moe_layer_freq: 2 }));
    expect(() => hfToGguf(ds, join(ds, 'x.gguf'))).toThrow(/moe_layer_freq/);
  });
});
