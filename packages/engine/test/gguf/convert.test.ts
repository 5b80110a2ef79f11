import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gguf as parseGguf } from '@huggingface/gguf';
import { afterAll, describe, expect, it } from 'vitest';
import { loadModelConfig } from '../../src/format/model-files.js';
import { hfToGguf, llama3RopeFactors, permuteRope } from '../../src/gguf/index.js';
import { F16_TO_F32 } from '../../src/numeric/half.js';
import { Checkpoint } from '../../src/safetensors/checkpoint.js';
import { writeRandomModel, type RandomModelVariant } from '../../src/testing/index.js';

const root = mkdtempSync(join(tmpdir(), 'orchard-gguf-convert-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function readBack(path: string) {
  const parsed = await parseGguf(path, { allowLocalFile: true });
  const file = readFileSync(path);
  const data = (name: string): Float32Array | Uint16Array => {
    const t = parsed.tensorInfos.find((x) => x.name === name);
    if (!t) throw new Error(`no tensor ${name}`);
    const n = t.shape.reduce((a, b) => a * Number(b), 1);
    const start = Number(parsed.tensorDataOffset + t.offset);
    const bytes = new Uint8Array(file.subarray(start, start + n * (t.dtype === 0 ? 4 : 2)));
    return t.dtype === 0 ? new Float32Array(bytes.buffer) : new Uint16Array(bytes.buffer);
  };
  return { parsed, metadata: parsed.metadata as unknown as Record<string, unknown>, data };
}

function hfTensor(dir: string, name: string): Float32Array {
  const ck = Checkpoint.open(dir);
  try {
    const f = ck.file(name);
    const info = f.info(name);
    const n = info.shape.reduce((a, b) => a * b, 1);
    const rows = info.shape.length === 1 ? 1 : info.shape[0];
    const out = new Float32Array(n);
    f.readBlock(name, new Uint8Array(out.buffer), 0, rows, 0, n / rows);
    return out;
  } finally {
    ck.close();
  }
}

/** Applies RoPE at position `pos` to one head: HF rotate-half (pairs i, i+d/2) or llama.cpp adjacent pairs (2i, 2i+1). */
function rope(x: Float32Array, pos: number, theta: number, adjacent: boolean): Float32Array {
  const d = x.length;
  const out = new Float32Array(d);
  for (let i = 0; i < d / 2; i++) {
    const a = pos / theta ** ((2 * i) / d);
    const [p, q] = adjacent ? [2 * i, 2 * i + 1] : [i, i + d / 2];
    out[p] = x[p] * Math.cos(a) - x[q] * Math.sin(a);
    out[q] = x[q] * Math.cos(a) + x[p] * Math.sin(a);
  }
  return out;
}

describe('permuteRope', () => {
  it('makes adjacent-pair RoPE on permuted rows equal rotate-half RoPE on the original rows (then permuted)', () => {
    const heads = 3;
    const d = 8;
    const cols = 5;
    const w = Float32Array.from({ length: heads * d * cols }, (_, i) => Math.sin(i * 1.3));
    const x = Float32Array.from({ length: cols }, (_, i) => Math.cos(i * 0.7));
    const mv = (m: Float32Array) => Float32Array.from({ length: heads * d }, (_, r) => x.reduce((s, xv, c) => s + m[r * cols + c] * xv, 0));
    const wp = permuteRope(w, [heads * d, cols], heads, d);
    for (const pos of [0, 1, 7, 100]) {
      for (let h = 0; h < heads; h++) {
        const hf = rope(mv(w).subarray(h * d, (h + 1) * d), pos, 10000, false);
        const cpp = rope(mv(wp).subarray(h * d, (h + 1) * d), pos, 10000, true);
        // Same rotated vector, listed in the permuted order.
        const hfPermuted = permuteRope(hf, [d], 1, d);
        for (let i = 0; i < d; i++) expect(cpp[i]).toBeCloseTo(hfPermuted[i], 5);
      }
    }
    // A permutation: same multiset of rows, and row 1 of head 0 came from row d/2.
    expect([...wp].sort()).toEqual([...w].sort());
    expect(wp.subarray(cols, 2 * cols)).toEqual(w.subarray((d / 2) * cols, (d / 2 + 1) * cols));
  });
});

describe('hfToGguf', () => {
  const cases: { variant: RandomModelVariant; tied: boolean; arch: string; permute: boolean }[] = [
    { variant: 'llama', tied: false, arch: 'llama', permute: true },
    { variant: 'llama3', tied: true, arch: 'llama', permute: true },
    { variant: 'mistral', tied: false, arch: 'llama', permute: true },
    { variant: 'qwen2', tied: true, arch: 'qwen2', permute: false },
    { variant: 'qwen3', tied: false, arch: 'qwen3', permute: false },
  ];
  for (const c of cases) {
    it(`converts ${c.variant}${c.tied ? ' (tied)' : ''} to arch ${c.arch} with llama.cpp names, shapes and hyper-parameters`, async () => {
      const dir = join(root, c.variant);
      const info = writeRandomModel(dir, { variant: c.variant, tiedEmbeddings: c.tied, numLayers: 2, seed: 7 });
      const cfg = loadModelConfig(dir);
      const out = join(root, `${c.variant}.gguf`);
      const res = hfToGguf(dir, out, { dtype: 'f32' });
      expect(res.arch).toBe(c.arch);
      const { parsed, metadata, data } = await readBack(out);
      const a = c.arch;
      expect(metadata['general.architecture']).toBe(a);
      expect(metadata[`${a}.block_count`]).toBe(2);
      expect(metadata[`${a}.embedding_length`]).toBe(cfg.hiddenSize);
      expect(metadata[`${a}.feed_forward_length`]).toBe(cfg.intermediateSize);
      expect(metadata[`${a}.attention.head_count`]).toBe(cfg.numHeads);
      expect(metadata[`${a}.attention.head_count_kv`]).toBe(cfg.numKvHeads);
      expect(metadata[`${a}.rope.dimension_count`]).toBe(cfg.headDim);
      expect(metadata[`${a}.attention.key_length`]).toBe(cfg.headDim);
      expect(metadata[`${a}.rope.freq_base`]).toBe(cfg.ropeTheta);
      expect(metadata[`${a}.vocab_size`]).toBe(cfg.vocabSize);
      expect(metadata['tokenizer.ggml.model']).toBe('gpt2');
      const tokens = metadata['tokenizer.ggml.tokens'] as string[];
      expect(tokens).toHaveLength(cfg.vocabSize);
      expect(tokens[65]).toBe('A');
      expect(tokens[32]).toBe('Ġ'); // GPT-2 byte-to-unicode for the space byte
      expect(tokens[info.eosTokenId]).toBe('<|endoftext|>');
      expect(tokens[cfg.vocabSize - 1]).toBe(`[PAD${cfg.vocabSize - 1}]`);
      expect(metadata['tokenizer.ggml.merges']).toEqual([]);
      expect(metadata['tokenizer.ggml.eos_token_id']).toBe(info.eosTokenId);

      const names = parsed.tensorInfos.map((t) => t.name);
      expect(names.includes('output.weight')).toBe(!c.tied);
      expect(names.includes('rope_freqs.weight')).toBe(c.variant === 'llama3');
      expect(names.includes('blk.1.attn_q.bias')).toBe(c.variant === 'qwen2');
      expect(names.includes('blk.1.attn_k_norm.weight')).toBe(c.variant === 'qwen3');
      // Every HF tensor is there exactly once (plus rope_freqs for llama3).
      expect(names.length).toBe(info.tensorNames.length + (c.variant === 'llama3' ? 1 : 0));
      const q = parsed.tensorInfos.find((t) => t.name === 'blk.1.attn_q.weight')!;
      expect(q.shape.map(Number)).toEqual([cfg.hiddenSize, cfg.numHeads * cfg.headDim]);
      const emb = parsed.tensorInfos.find((t) => t.name === 'token_embd.weight')!;
      expect(emb.shape.map(Number)).toEqual([cfg.hiddenSize, cfg.vocabSize]);

      // Untouched tensors are copied bit for bit; q/k are permuted only for arch llama.
      expect(data('blk.1.ffn_down.weight')).toEqual(hfTensor(dir, 'model.layers.1.mlp.down_proj.weight'));
      expect(data('blk.0.attn_v.weight')).toEqual(hfTensor(dir, 'model.layers.0.self_attn.v_proj.weight'));
      const hfK = hfTensor(dir, 'model.layers.0.self_attn.k_proj.weight');
      const expectedK = c.permute ? permuteRope(hfK, [cfg.numKvHeads * cfg.headDim, cfg.hiddenSize], cfg.numKvHeads, cfg.headDim) : hfK;
      expect(data('blk.0.attn_k.weight')).toEqual(expectedK);
      if (c.permute) expect(data('blk.0.attn_k.weight')).not.toEqual(hfK);
      if (c.variant === 'llama3') expect(data('rope_freqs.weight')).toEqual(llama3RopeFactors(cfg));
    });
  }

  it('keeps F16 matrices F16 (norms F32) when the checkpoint is F16', async () => {
    const dir = join(root, 'f16');
    writeRandomModel(dir, { variant: 'llama', dtype: 'f16', numLayers: 1, seed: 3 });
    const out = join(root, 'f16.gguf');
    hfToGguf(dir, out);
    const { parsed, metadata, data } = await readBack(out);
    expect(metadata['general.file_type']).toBe(1);
    const type = (n: string) => parsed.tensorInfos.find((t) => t.name === n)!.dtype;
    expect(type('blk.0.ffn_up.weight')).toBe(1);
    expect(type('blk.0.attn_norm.weight')).toBe(0);
    const up = data('blk.0.ffn_up.weight') as Uint16Array;
    const ck = Checkpoint.open(dir);
    const bits = new Uint16Array(up.length);
    ck.file('model.layers.0.mlp.up_proj.weight').readBlock('model.layers.0.mlp.up_proj.weight', new Uint8Array(bits.buffer), 0, 128, 0, 64);
    ck.close();
    expect(up).toEqual(bits);
    expect(F16_TO_F32[up[5]]).toBe(F16_TO_F32[bits[5]]);
  });

  it('llama3 rope factors follow the three bands of the scaling', () => {
    const dir = join(root, 'llama3-factors');
    writeRandomModel(dir, { variant: 'llama3', numLayers: 1 });
    const cfg = loadModelConfig(dir);
    const f = llama3RopeFactors(cfg)!;
    expect(f).toHaveLength(cfg.headDim / 2);
    expect(f[0]).toBe(1); // highest frequency: unscaled
    expect(f[f.length - 1]).toBe(cfg.ropeScaling!.factor); // lowest frequency: divided by factor
    for (let i = 1; i < f.length; i++) expect(f[i]).toBeGreaterThanOrEqual(f[i - 1]);
  });

  it('names what it cannot convert', () => {
    const dir = join(root, 'mistral-swa');
    writeRandomModel(dir, { variant: 'mistral', numLayers: 1 });
    const cfgPath = join(dir, 'config.json');
    const cfg = JSON.parse(readFileSync(cfgPath, 'utf8'));
    cfg.sliding_window = 16;
    writeFileSync(cfgPath, JSON.stringify(cfg));
    expect(() => hfToGguf(dir, join(root, 'x.gguf'))).toThrow(/sliding_window 16/);
  });
});
