/**
 * MXFP4 formats: Hugging Face gpt-oss expert tensors (`X_blocks` / `X_scales`, element 2i in the low
 * nibble of byte i) loaded per expert into the GGUF order dequantize to exactly what transformers'
 * convert_moe_packed_tensors computes (FP4 table · 2^(scale − 127)), for whole experts and row/column
 * blocks; misaligned column slices and malformed tensors are refused by name. The quantizer's codes
 * round-trip to the nearest representable value. A gpt-oss GGUF with MXFP4 experts (llama.cpp's layout
 * for the released gpt-oss files) keeps them in their blocks and runs: WASM equals the reference
 * backend's dequantized pass, a split by experts equals the unsplit model. gpt-oss as released on
 * Hugging Face (merged experts as MXFP4 `_blocks` / `_scales`) runs the same function as the same model
 * with those experts dequantized to f32, whole and split by experts.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Checkpoint, createReferenceBackend, createWasmBackend, generate, loadInProcessModel, loadShard, ModelFormatError, UnsupportedModelError, writeSafetensors, type Backend } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { hfToGguf } from '../../src/gguf/index.js';
import { readGgufFile } from '../../src/gguf/read-split.js';
import { readAsF32 } from '../../src/gguf/convert-tensors.js';
import { readPlanSync, type MoeWeights } from '../../src/model/weights.js';
import { dequantizeMxfp4Row, quantizeMxfp4 } from '../../src/quant/mxfp4.js';
import { planMxfp4Expert } from '../../src/quant/mxfp4-hf.js';
import { ReadScratch } from '../../src/quant/read-scratch.js';
import { Prng } from '../../src/numeric/prng.js';

const work = mkdtempSync(join(tmpdir(), 'orchard-mxfp4-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** transformers' FP4_VALUES. */
const FP4 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];

describe('MXFP4', () => {
  const E = 3;
  const OUT = 12;
  const IN = 96;
  const rng = new Prng(8);
  const blocks = Uint8Array.from({ length: E * OUT * (IN / 32) * 16 }, () => Math.floor(rng.next() * 256));
  const scales = Uint8Array.from({ length: E * OUT * (IN / 32) }, () => 110 + Math.floor(rng.next() * 30));
  const dir = join(work, 'gpt-oss');
  mkdirSync(dir);
  writeSafetensors(join(dir, 'model.safetensors'), [
    { name: 'model.layers.0.mlp.experts.down_proj_blocks', dtype: 'U8', shape: [E, OUT, IN / 32, 16], data: blocks },
    { name: 'model.layers.0.mlp.experts.down_proj_scales', dtype: 'U8', shape: [E, OUT, IN / 32], data: scales },
    { name: 'bad_blocks', dtype: 'U8', shape: [E, OUT, IN / 32, 8], data: blocks.subarray(0, E * OUT * (IN / 32) * 8) },
    { name: 'bad_scales', dtype: 'U8', shape: [E, OUT, IN / 32], data: scales },
  ]);
  /** transformers' dequantization of element (e, row, col). */
  const hf = (e: number, row: number, col: number) => {
    const g = (e * OUT + row) * (IN / 32) + Math.floor(col / 32);
    const j = col % 32;
    const byte = blocks[g * 16 + (j >> 1)];
    return FP4[j & 1 ? byte >> 4 : byte & 15] * 2 ** (scales[g] - 127);
  };

  it('an expert read from Hugging Face blocks dequantizes as transformers does, whole and in row/column blocks', () => {
    const ckpt = Checkpoint.open(dir);
    try {
      for (const [expert, r, c] of [[1, [0, OUT], [0, IN]], [2, [3, 9], [32, 96]], [0, [5, 6], [64, 96]]] as Array<[number, [number, number], [number, number]]>) {
        const scratch = new ReadScratch();
        const { weight, reads } = planMxfp4Expert(ckpt, 'model.layers.0.mlp.experts.down_proj', expert, r, c, createReferenceBackend(), scratch);
        readPlanSync(reads);
        expect(weight.dtype).toBe('mxfp4');
        expect(weight.bytes.byteLength).toBe(((r[1] - r[0]) * (c[1] - c[0]) * 17) / 32);
        const row = new Float32Array(weight.cols);
        for (let i = 0; i < weight.rows; i++) {
          dequantizeMxfp4Row(weight.bytes, weight.cols, i, row);
          for (let j = 0; j < weight.cols; j++) expect(row[j], `expert ${expert} row ${r[0] + i} col ${c[0] + j}`).toBe(Math.fround(hf(expert, r[0] + i, c[0] + j)) + 0); // (+0: FP4 code 8 is −0, ggml's table 0)
        }
      }
    } finally {
      ckpt.close();
    }
  });

  it('refuses a column slice inside a block and malformed tensors, naming them', () => {
    const ckpt = Checkpoint.open(dir);
    try {
      const plan = (base: string, c: [number, number]) => () => planMxfp4Expert(ckpt, base, 0, [0, 2], c, createReferenceBackend(), new ReadScratch());
      expect(plan('model.layers.0.mlp.experts.down_proj', [16, 64])).toThrow(UnsupportedModelError);
      expect(plan('model.layers.0.mlp.experts.down_proj', [16, 64])).toThrow(/cannot split model\.layers\.0\.mlp\.experts\.down_proj \(mxfp4\) at columns \[16, 64\).*32-weight block/);
      expect(plan('bad', [0, 32])).toThrow(ModelFormatError);
      expect(plan('bad', [0, 32])).toThrow(/MXFP4 tensor bad_blocks: must be U8 \[experts, out, blocks, 16\], got U8 \[3,12,3,8\]/);
    } finally {
      ckpt.close();
    }
  });

  it('the quantizer picks each block exponent to cover its largest value and rounds to the nearest FP4 value', () => {
    const v = Float32Array.from({ length: 4 * 64 }, (_, i) => Math.sin(i * 0.7) * 2 ** ((i >> 5) - 3));
    const q = quantizeMxfp4(v, 4, 64);
    const out = new Float32Array(64);
    for (let r = 0; r < 4; r++) {
      dequantizeMxfp4Row(q, 64, r, out);
      for (let j = 0; j < 64; j++) {
        const b = r * 2 + (j >> 5);
        const d = 2 ** (q[b * 17] - 128);
        const x = v[r * 64 + j];
        // the nearest of the block's representable values ±{0, 1, 2, 3, 4, 6, 8, 12}·d
        const best = Math.min(...[0, 1, 2, 3, 4, 6, 8, 12].flatMap((k) => [k * d, -k * d]).map((c) => Math.abs(c - x)));
        expect(Math.abs(out[j] - x), `row ${r} col ${j}`).toBeCloseTo(best, 12);
        expect(Math.abs(x)).toBeLessThanOrEqual(12 * d);
      }
    }
  });
});

describe('gpt-oss GGUF with MXFP4 experts', () => {
  const dir = join(work, 'gpt-oss-model');
  const info = writeRandomModel(dir, { variant: 'gpt-oss', seed: 13, numLayers: 2 });
  // llama.cpp's yarn rounds the correction range (as in test/gguf/moe-gguf.test.ts)
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...info.config, rope_scaling: { ...(info.config.rope_scaling as object), truncate: true } }));
  const gguf = join(dir, 'model-mxfp4.gguf');
  hfToGguf(dir, gguf, { dtype: 'mxfp4' });
  const TOKENS = [5, 77, 130, 9, 201, 33];
  const run = async (backend: () => Backend, split: { tensor?: number } = {}) => {
    const m = loadInProcessModel(gguf, { backend, maxBatch: 8, ...split });
    try {
      const logits = Float32Array.from(await m.newSession().forward(TOKENS));
      const tokens = (await generate(m, TOKENS, { maxTokens: 12, temperature: 0, stopTokenIds: [] })).tokens;
      return { logits, tokens };
    } finally {
      m.dispose();
    }
  };
  const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

  it('keeps the experts in MXFP4 blocks and runs them: WASM = reference, split by experts = unsplit', async () => {
    expect(readGgufFile(gguf).tensors.get('blk.0.ffn_gate_exps.weight')!.type).toBe('MXFP4');
    const shard = loadShard(gguf, { layers: [0, 2], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend: createReferenceBackend() });
    const moe = shard.weights.layers[0].mlp as MoeWeights;
    expect([moe.experts[0].gate.dtype, moe.experts[0].up.dtype, moe.experts[0].down.dtype]).toEqual(['mxfp4', 'mxfp4', 'mxfp4']);
    shard.dispose();
    const ref = await run(createReferenceBackend);
    const scale = ref.logits.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    const wasm = await run(() => createWasmBackend({ threads: 1 }));
    // the WASM kernels quantize activations to 8 bits per 32 as ggml does (every matrix here is MXFP4 or
    // Q8_0): close, not equal — 1.7% of the logit scale seen; a wrong expert or block moves logits by ~scale
    expect(maxDiff(wasm.logits, ref.logits)).toBeLessThanOrEqual(3e-2 * scale);
    expect(wasm.tokens).toEqual(ref.tokens);
    const split = await run(createReferenceBackend, { tensor: 2 });
    expect(maxDiff(split.logits, ref.logits)).toBeLessThanOrEqual(1e-5 * scale);
    expect(split.tokens).toEqual(ref.tokens);
  });
});

/** GGUF-order MXFP4 blocks (quantizeMxfp4) of [rows, cols] to Hugging Face's `_blocks` / `_scales` (element 2i low nibble of byte i). */
function ggufToHfBlocks(gguf: Uint8Array, nBlocks: number): { blocks: Uint8Array; scales: Uint8Array } {
  const blocks = new Uint8Array(nBlocks * 16);
  const scales = new Uint8Array(nBlocks);
  for (let b = 0; b < nBlocks; b++) {
    scales[b] = gguf[17 * b];
    for (let k = 0; k < 32; k++) {
      const q = gguf[17 * b + 1 + (k & 15)];
      blocks[16 * b + (k >> 1)] |= (k < 16 ? q & 15 : q >> 4) << (4 * (k & 1));
    }
  }
  return { blocks, scales };
}

describe('gpt-oss with Hugging Face MXFP4 experts (as released)', () => {
  const src = join(work, 'gpt-oss-f32');
  const info = writeRandomModel(src, { variant: 'gpt-oss', seed: 17, numLayers: 2 });
  const mx = join(work, 'gpt-oss-hf-mxfp4');
  const deq = join(work, 'gpt-oss-dequantized');
  for (const d of [mx, deq]) {
    mkdirSync(d);
    for (const f of readdirSync(src)) if (f !== 'model.safetensors') copyFileSync(join(src, f), join(d, f));
  }
  writeFileSync(join(mx, 'config.json'), JSON.stringify({ ...info.config, quantization_config: { quant_method: 'mxfp4', modules_to_not_convert: ['model.layers.*.self_attn', 'model.layers.*.mlp.router', 'model.embed_tokens', 'lm_head'] } }));
  const ckpt = Checkpoint.open(src);
  const plain: { name: string; dtype: string; shape: number[]; data: Uint8Array }[] = [];
  const packed: typeof plain = [];
  for (const name of info.tensorNames) {
    const shape = ckpt.info(name).shape;
    const values = readAsF32(ckpt, name);
    if (!/\.experts\.(gate_up|down)_proj$/.test(name)) {
      const t = { name, dtype: 'F32', shape, data: new Uint8Array(values.buffer) };
      plain.push(t);
      packed.push(t);
      continue;
    }
    // [E, in, out] input-major → per expert [out, in], quantized, then back to [E, in, out] dequantized
    const [E, IN, OUT] = shape;
    const nb = (OUT * IN) / 32;
    const blocks = new Uint8Array(E * nb * 16);
    const scales = new Uint8Array(E * nb);
    const exact = new Float32Array(values.length);
    const row = new Float32Array(IN);
    for (let e = 0; e < E; e++) {
      const w = new Float32Array(OUT * IN);
      for (let o = 0; o < OUT; o++) for (let i = 0; i < IN; i++) w[o * IN + i] = values[(e * IN + i) * OUT + o];
      const q = quantizeMxfp4(w, OUT, IN);
      const hf = ggufToHfBlocks(q, nb);
      blocks.set(hf.blocks, e * nb * 16);
      scales.set(hf.scales, e * nb);
      for (let o = 0; o < OUT; o++) {
        dequantizeMxfp4Row(q, IN, o, row);
        for (let i = 0; i < IN; i++) exact[(e * IN + i) * OUT + o] = row[i];
      }
    }
    plain.push({ name, dtype: 'F32', shape, data: new Uint8Array(exact.buffer) });
    packed.push({ name: `${name}_blocks`, dtype: 'U8', shape: [E, OUT, IN / 32, 16], data: blocks }, { name: `${name}_scales`, dtype: 'U8', shape: [E, OUT, IN / 32], data: scales });
  }
  ckpt.close();
  writeSafetensors(join(mx, 'model.safetensors'), packed);
  writeSafetensors(join(deq, 'model.safetensors'), plain);
  const TOKENS = [4, 61, 150, 22, 9, 230];
  const run = async (dir: string, split: { tensor?: number } = {}) => {
    const m = loadInProcessModel(dir, { backend: createReferenceBackend, maxBatch: 8, ...split });
    try {
      return Float32Array.from(await m.newSession().forward(TOKENS));
    } finally {
      m.dispose();
    }
  };
  const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

  it('keeps the experts in MXFP4 and runs the dequantized model\'s function, whole and split by experts', async () => {
    const shard = loadShard(mx, { layers: [0, 2], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend: createReferenceBackend() });
    const ex = (shard.weights.layers[1].mlp as MoeWeights).experts[3];
    expect([ex.gate.dtype, ex.up.dtype, ex.down.dtype]).toEqual(['mxfp4', 'mxfp4', 'mxfp4']);
    shard.dispose();
    const want = await run(deq);
    const scale = want.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    // the quantization is real: the f32 source model differs
    expect(maxDiff(await run(src), want)).toBeGreaterThan(1e-3 * scale);
    expect(maxDiff(await run(mx), want)).toBeLessThanOrEqual(1e-5 * scale);
    expect(maxDiff(await run(mx, { tensor: 2 }), want)).toBeLessThanOrEqual(1e-5 * scale);
  });
});
