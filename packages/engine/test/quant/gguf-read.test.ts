/**
 * GGUF reader and loader: headers parse back what the writer wrote, llama-arch q/k rows are
 * un-permuted (an F32 GGUF runs bit-identical to its HF directory), Q8_0/Q4_0 weights arrive as the
 * very blocks ggml's reference quantizer makes of the HF rows, tensor splits stay block-aligned, and
 * bad files fail with messages naming file and field.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  Checkpoint,
  createReferenceBackend,
  createWasmBackend,
  loadInProcessModel,
  loadModelConfig,
  loadShard,
  loadShardAsync,
  loadTokenizer,
  ModelFormatError,
  UnsupportedModelError,
} from '@orchard/engine';
import { gguf, hfToGguf, writeGguf } from '@orchard/engine/gguf';
import { writeRandomModel, type RandomModelOptions } from '@orchard/engine/testing';
import { readGgufFile } from '../../src/gguf/read-split.js';
import { GgufCheckpoint } from '../../src/gguf/read-model.js';
import { quantizeQ4_0, quantizeQ8_0 } from '../../src/kernels/wasm/quant-reference.js';
import { F16_TO_F32 } from '../../src/numeric/half.js';
import type { DenseMlpWeights, GqaWeights } from '../../src/model/weights.js';

const work = mkdtempSync(join(tmpdir(), 'orchard-gguf-read-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function model(name: string, options: RandomModelOptions): string {
  const dir = join(work, name);
  writeRandomModel(dir, { hiddenSize: 64, intermediateSize: 128, numLayers: 2, seed: 5, ...options });
  return dir;
}

function hfMatrix(dir: string, name: string): Float32Array {
  const ck = Checkpoint.open(dir);
  try {
    const info = ck.info(name);
    const n = info.shape.reduce((a, b) => a * b, 1);
    const f = ck.file(name);
    if (info.dtype === 'F32') {
      const out = new Float32Array(n);
      f.readBlock(name, new Uint8Array(out.buffer), 0, info.shape[0], 0, n / info.shape[0]);
      return out;
    }
    const bits = new Uint16Array(n);
    f.readBlock(name, new Uint8Array(bits.buffer), 0, info.shape[0], 0, n / info.shape[0]);
    return Float32Array.from(bits, (b) => F16_TO_F32[b]);
  } finally {
    ck.close();
  }
}

async function logits(path: string, tokens: number[], opts: Parameters<typeof loadInProcessModel>[1] = {}): Promise<Float32Array> {
  const m = loadInProcessModel(path, opts);
  try {
    return Float32Array.from(await m.newSession().forward(tokens));
  } finally {
    m.dispose();
  }
}

const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);
const TOKENS = [3, 77, 120, 9, 250, 4, 61];

describe('GGUF header', () => {
  it('parses metadata, tensor infos and alignment the writer produced', () => {
    const path = join(work, 'hdr.gguf');
    const q = new Float32Array(4 * 64).map((_, i) => Math.sin(i));
    writeGguf(
      path,
      { 'general.architecture': gguf.str('llama'), 'x.u32': gguf.u32(7), 'x.f32': gguf.f32(0.5), 'x.arr': gguf.arr('INT32', [1, -2, 3]), 'x.b': gguf.bool(true) },
      [
        { name: 'a', type: 'F32', shape: [3], data: () => new Uint8Array(new Float32Array([1, 2, 3]).buffer) },
        { name: 'w', type: 'Q8_0', shape: [4, 64], data: () => quantizeQ8_0(q, 4, 64) },
        { name: 'v', type: 'Q4_0', shape: [2, 32], data: () => quantizeQ4_0(q.subarray(0, 64), 2, 32) },
      ],
      { alignment: 64 },
    );
    const h = readGgufFile(path);
    expect(h.version).toBe(3);
    expect(h.alignment).toBe(64);
    expect(h.metadata.get('x.u32')).toBe(7);
    expect(h.metadata.get('x.f32')).toBe(0.5);
    expect(h.metadata.get('x.arr')).toEqual([1, -2, 3]);
    expect(h.metadata.get('x.b')).toBe(true);
    const w = h.tensors.get('w')!;
    expect(w).toMatchObject({ type: 'Q8_0', dims: [64, 4], shape: [4, 64], bytes: 4 * 2 * 34 });
    expect(w.offset % 64).toBe(0);
    const bytes = readFileSync(path);
    expect(new Uint8Array(bytes.subarray(w.offset, w.offset + w.bytes))).toEqual(quantizeQ8_0(q, 4, 64));
    expect(h.tensors.get('v')).toMatchObject({ type: 'Q4_0', bytes: 2 * 18 });
  });

  it('names the defect in corrupt files', () => {
    const path = join(work, 'bad.gguf');
    writeFileSync(path, Buffer.from('GGUX....'));
    expect(() => readGgufFile(path)).toThrow(/bad\.gguf: not a GGUF file/);
    const good = join(work, 'trunc-src.gguf');
    writeGguf(good, { 'general.architecture': gguf.str('llama') }, [{ name: 't', type: 'F32', shape: [64], data: () => new Uint8Array(256) }]);
    const full = readFileSync(good);
    writeFileSync(path, full.subarray(0, full.length - 8));
    expect(() => readGgufFile(path)).toThrow(/truncated, tensor t needs/);
    writeFileSync(path, full.subarray(0, 30));
    expect(() => readGgufFile(path)).toThrow(/truncated GGUF header/);
    const odd = Buffer.from(full);
    const info = odd.indexOf(Buffer.from([1, 0, 0, 0, 0, 0, 0, 0, 0x74])); // tensor name "t" (u64 length 1)
    odd.writeUInt32LE(99, info + 9 + 4 + 8); // its ggml type, after name, n_dims and dim0
    writeFileSync(path, odd);
    expect(() => readGgufFile(path)).toThrow(/tensor t has ggml type 99/);
  });
});

describe('GGUF models', () => {
  const variants: [string, RandomModelOptions][] = [
    ['llama GQA', { variant: 'llama', numHeads: 4, numKvHeads: 2 }],
    ['llama attention_bias', { variant: 'llama', attentionBias: true }],
    ['qwen2 bias, tied', { variant: 'qwen2', tiedEmbeddings: true }],
    ['qwen3 q/k norm', { variant: 'qwen3' }],
  ];
  for (const [name, opts] of variants) {
    it(`${name}: an F32 GGUF loads to the HF model's config and logits exactly`, async () => {
      const dir = model(name.replace(/\W/g, '_'), opts);
      const path = join(dir, 'model-f32.gguf');
      hfToGguf(dir, path, { dtype: 'f32' });
      const a = loadModelConfig(dir);
      const b = loadModelConfig(path);
      for (const k of ['architecture', 'hiddenSize', 'intermediateSize', 'numLayers', 'numHeads', 'numKvHeads', 'headDim', 'vocabSize', 'qkvBias', 'oBias', 'tieWordEmbeddings', 'eosTokenIds'] as const) {
        expect(b[k], k).toEqual(a[k]);
      }
      expect(b.ropeTheta).toBeCloseTo(a.ropeTheta, 3);
      expect(maxDiff(await logits(path, TOKENS), await logits(dir, TOKENS))).toBe(0);
    });
  }

  it('Q8_0/Q4_0 weights stay quantized: loaded bytes are the reference quantizer blocks of the HF rows (q/k un-permuted)', () => {
    const dir = model('quant', { variant: 'llama', numHeads: 4, numKvHeads: 2, dtype: 'f16' });
    for (const [dtype, quantize] of [['q8_0', quantizeQ8_0], ['q4_0', quantizeQ4_0]] as const) {
      const path = join(dir, `model-${dtype}.gguf`);
      hfToGguf(dir, path, { dtype });
      const shard = loadShard(path, { layers: [0, 2], tensor: { rank: 0, size: 1 }, embed: true, head: true });
      const L = { ...(shard.weights.layers[1].attention as GqaWeights), ...(shard.weights.layers[1].mlp as DenseMlpWeights) };
      for (const [w, name] of [
        [L.q, 'model.layers.1.self_attn.q_proj.weight'],
        [L.k, 'model.layers.1.self_attn.k_proj.weight'],
        [L.down, 'model.layers.1.mlp.down_proj.weight'],
        [shard.weights.embed!, 'model.embed_tokens.weight'],
      ] as const) {
        expect(w.dtype, name).toBe(dtype);
        const hf = hfMatrix(dir, name);
        expect(w.bytes, name).toEqual(quantize(hf, w.rows, w.cols));
      }
    }
  });

  it('quantized GGUFs run on both backends, tensor splits equal the whole model, misaligned column splits are refused', async () => {
    const dir = model('split', { variant: 'llama', numHeads: 4, numKvHeads: 2, hiddenSize: 128, intermediateSize: 256 });
    const path = join(dir, 'model-q8_0.gguf');
    hfToGguf(dir, path, { dtype: 'q8_0' });
    const whole = await logits(path, TOKENS);
    expect(maxDiff(whole, await logits(path, TOKENS, { tensor: 2, pipeline: 2 }))).toBeLessThan(1e-4);
    const wasm = await logits(path, TOKENS, { tensor: 2, backend: () => createWasmBackend({ threads: 1 }) });
    // WASM quantizes activations to 8 bits per block (llama.cpp's scheme); the reference keeps f32.
    expect(maxDiff(whole, wasm)).toBeLessThan(0.05);
    expect(maxDiff(whole, await logits(dir, TOKENS))).toBeLessThan(0.1);
    // 4 heads of 32 dims: o_proj columns split at 32 (aligned, fine); 4 ranks of 64-wide FFN fine too.
    expect(maxDiff(whole, await logits(path, TOKENS, { tensor: 4 }))).toBeLessThan(1e-4);

    const dir16 = model('misaligned', { variant: 'llama', numHeads: 4, numKvHeads: 2, hiddenSize: 64, intermediateSize: 128 });
    const p16 = join(dir16, 'model-q4_0.gguf');
    hfToGguf(dir16, p16, { dtype: 'q4_0' });
    // head_dim 16: rank 1 of 4 holds o_proj columns [16, 32), inside one 32-block.
    const err = (() => {
      try {
        loadShard(p16, { layers: [0, 1], tensor: { rank: 1, size: 4 }, embed: false, head: false }, { allReduce: async () => {}, backend: createReferenceBackend() });
      } catch (e) {
        return e as Error;
      }
      return null;
    })();
    expect(err).toBeInstanceOf(UnsupportedModelError);
    expect(err!.message).toMatch(/model-q4_0\.gguf: cannot split model\.layers\.0\.self_attn\.o_proj\.weight \(q4_0\) at columns \[16, 32\).*32-element block/);
  });

  it('the GGUF tokenizer encodes and decodes like the HF directory it came from', () => {
    const dir = model('tok', { variant: 'qwen2' });
    const path = join(dir, 'm.gguf');
    hfToGguf(dir, path, { dtype: 'f16' });
    const a = loadTokenizer(dir);
    const b = loadTokenizer(path);
    for (const text of ['In the beginning', 'héllo wörld 123 <|im_end|>', '']) {
      expect(b.encode(text), text).toEqual(a.encode(text));
      expect(b.decode(a.encode(text))).toBe(a.decode(a.encode(text)));
    }
  });

  it('loadShardAsync reads a GGUF like loadShard (same bytes, same logits)', async () => {
    const dir = model('async', { variant: 'llama', numHeads: 4, numKvHeads: 2 });
    const path = join(dir, 'm.gguf');
    hfToGguf(dir, path, { dtype: 'q4_0' });
    const spec = { layers: [0, 2] as [number, number], tensor: { rank: 0, size: 1 }, embed: true, head: true };
    const a = loadShard(path, spec);
    const b = await loadShardAsync(path, spec);
    expect(b.bytesRead).toBe(a.bytesRead);
    expect((b.weights.layers[1].attention as GqaWeights).q.bytes).toEqual((a.weights.layers[1].attention as GqaWeights).q.bytes);
    const la = Float32Array.from(await a.forward({ tokens: TOKENS }, a.newCache()));
    const lb = await b.forward({ tokens: TOKENS }, b.newCache());
    expect([...lb]).toEqual([...la]);
  });

  it('refuses unsupported architectures and missing tensors by name', () => {
    const path = join(work, 'arch.gguf');
    writeGguf(path, { 'general.architecture': gguf.str('gpt2') }, [{ name: 'token_embd.weight', type: 'F32', shape: [4, 32], data: () => new Uint8Array(512) }]);
    expect(() => loadModelConfig(path)).toThrow(/arch\.gguf: GGUF architecture gpt2 is not supported/);
    const dir = model('missing', { variant: 'llama' });
    const p = join(dir, 'm.gguf');
    hfToGguf(dir, p, { dtype: 'f32' });
    const ck = GgufCheckpoint.open(p);
    try {
      expect(() => ck.info('model.layers.9.mlp.up_proj.weight')).toThrow(ModelFormatError);
      expect(() => ck.info('model.layers.9.mlp.up_proj.weight')).toThrow(/m\.gguf: missing tensor blk\.9\.ffn_up\.weight/);
    } finally {
      ck.close();
    }
  });
});
