/**
 * MLX affine-quantized safetensors (packed uint32 weight + scales + biases): the dequantizer on
 * hand-packed tensors, and whole models: an MLX 4-bit/8-bit checkpoint loads to exactly the logits of
 * an f16 checkpoint holding q·scale + bias, split or not; bad quantization is refused by name.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Checkpoint, f32ToF16Bits, F16_TO_F32, loadInProcessModel, ModelFormatError, UnsupportedModelError, writeSafetensors, type TensorToWrite } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { dequantizeMlx, quantizeMlx, type MlxQuant } from '../../src/quant/mlx.js';

const work = mkdtempSync(join(tmpdir(), 'orchard-mlx-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('MLX dequantizer on hand-packed tensors', () => {
  it('4-bit: element j in bits 4·(j mod 8) of word ⌊j/8⌋; value = q·scale + bias per group', () => {
    const rows = 2;
    const cols = 64;
    const q = Array.from({ length: rows * cols }, (_, i) => (i * 7 + 3) % 16);
    const words = new Uint32Array((rows * cols) / 8);
    q.forEach((v, i) => (words[Math.floor(i / 8)] += v * 2 ** (4 * (i % 8))));
    const scales = new Float32Array([0.5, 2, -0.25, 1.5]);
    const biases = new Float32Array([-1, 3, 0.125, -8]);
    const out = new Uint8Array(rows * cols * 4);
    dequantizeMlx(words, scales, biases, rows, cols, { bits: 4, groupSize: 32 }, 'f32', out);
    const got = new Float32Array(out.buffer);
    for (let i = 0; i < rows * cols; i++) {
      const g = Math.floor(i / 32);
      expect(got[i], `element ${i}`).toBe(q[i] * scales[g] + biases[g]);
    }
    expect(got[0]).toBe(3 * 0.5 - 1);
    expect(got[64]).toBe(((64 * 7 + 3) % 16) * -0.25 + 0.125);
  });

  it('8-bit into f16: element j in byte j mod 4 of word ⌊j/4⌋', () => {
    const cols = 64;
    const q = Array.from({ length: cols }, (_, i) => (i * 37 + 250) % 256);
    const words = new Uint32Array(cols / 4);
    q.forEach((v, i) => (words[Math.floor(i / 4)] += v * 2 ** (8 * (i % 4))));
    const out = new Uint8Array(cols * 2);
    dequantizeMlx(words, new Float32Array([0.01]), new Float32Array([-1.25]), 1, cols, { bits: 8, groupSize: 64 }, 'f16', out);
    const got = new Uint16Array(out.buffer);
    for (let i = 0; i < cols; i++) expect(got[i]).toBe(f32ToF16Bits(Math.fround(Math.fround(q[i] * Math.fround(0.01)) + -1.25)));
  });

  it('quantizeMlx round-trips within half a step', () => {
    const v = Float32Array.from({ length: 4 * 128 }, (_, i) => Math.sin(i * 0.37) * (1 + (i % 5)));
    for (const q of [{ bits: 4, groupSize: 64 }, { bits: 8, groupSize: 32 }] as MlxQuant[]) {
      const { words, scales, biases } = quantizeMlx(v, 4, 128, q);
      const out = new Uint8Array(v.length * 4);
      dequantizeMlx(words, scales, biases, 4, 128, q, 'f32', out);
      const d = new Float32Array(out.buffer);
      for (let i = 0; i < v.length; i++) expect(Math.abs(d[i] - v[i])).toBeLessThanOrEqual(scales[Math.floor(i / q.groupSize)] / 2 + 1e-6);
    }
  });
});

const LINEAR = /(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj|embed_tokens|lm_head)\.weight$/;

/**
 * Converts the f16 HF model in `src` to an MLX-quantized checkpoint in `dst` and an f16 checkpoint
 * holding exactly the dequantized values in `expected`.
 */
function mlxify(src: string, dst: string, expected: string, q: MlxQuant, configQuant: unknown = { group_size: q.groupSize, bits: q.bits }): void {
  cpSync(src, dst, { recursive: true });
  cpSync(src, expected, { recursive: true });
  const ck = Checkpoint.open(src);
  const names = [...ck.file('model.embed_tokens.weight').tensors.keys()];
  const quantized: TensorToWrite[] = [];
  const plain: TensorToWrite[] = [];
  for (const name of names) {
    const info = ck.info(name);
    const n = info.shape.reduce((a, b) => a * b, 1);
    const rows = info.shape[0];
    const cols = n / rows;
    const bits16 = new Uint16Array(n);
    ck.file(name).readBlock(name, new Uint8Array(bits16.buffer), 0, info.shape.length === 1 ? 1 : rows, 0, info.shape.length === 1 ? n : cols);
    if (!LINEAR.test(name)) {
      quantized.push({ name, dtype: info.dtype, shape: info.shape, data: new Uint8Array(bits16.buffer) });
      plain.push({ name, dtype: info.dtype, shape: info.shape, data: new Uint8Array(bits16.buffer) });
      continue;
    }
    const values = Float32Array.from(bits16, (b) => F16_TO_F32[b]);
    const { words, scales, biases } = quantizeMlx(values, rows, cols, q);
    const s16 = Uint16Array.from(scales, f32ToF16Bits);
    const b16 = Uint16Array.from(biases, f32ToF16Bits);
    const base = name.slice(0, -'.weight'.length);
    quantized.push({ name, dtype: 'U32', shape: [rows, (cols * q.bits) / 32], data: new Uint8Array(words.buffer) });
    quantized.push({ name: `${base}.scales`, dtype: 'F16', shape: [rows, cols / q.groupSize], data: new Uint8Array(s16.buffer) });
    quantized.push({ name: `${base}.biases`, dtype: 'F16', shape: [rows, cols / q.groupSize], data: new Uint8Array(b16.buffer) });
    // Expected: q·scale + bias from the stored (f16) scale and bias, rounded to f16 once.
    const deq = new Uint16Array(n);
    for (let i = 0; i < n; i++) {
      const qv = (words[Math.floor(i / (32 / q.bits))] >>> ((i % (32 / q.bits)) * q.bits)) & ((1 << q.bits) - 1);
      const g = Math.floor(i / q.groupSize);
      deq[i] = f32ToF16Bits(Math.fround(Math.fround(qv * F16_TO_F32[s16[g]]) + F16_TO_F32[b16[g]]));
    }
    plain.push({ name, dtype: 'F16', shape: info.shape, data: new Uint8Array(deq.buffer) });
  }
  ck.close();
  writeSafetensors(join(dst, 'model.safetensors'), quantized);
  writeSafetensors(join(expected, 'model.safetensors'), plain);
  const cfg = JSON.parse(readFileSync(join(dst, 'config.json'), 'utf8'));
  if (configQuant !== null) cfg.quantization = configQuant;
  writeFileSync(join(dst, 'config.json'), JSON.stringify(cfg));
}

async function logits(dir: string, tokens: number[], tensor = 1): Promise<Float32Array> {
  const m = loadInProcessModel(dir, { tensor });
  try {
    return Float32Array.from(await m.newSession().forward(tokens));
  } finally {
    m.dispose();
  }
}

describe('MLX-quantized models', () => {
  const tokens = [5, 99, 200, 31, 7];
  for (const q of [{ bits: 4, groupSize: 64 }, { bits: 8, groupSize: 32 }] as MlxQuant[]) {
    it(`${q.bits}-bit, groups of ${q.groupSize}: logits equal the f16 model of q·scale + bias, whole and tensor-split`, async () => {
      const src = join(work, `src-${q.bits}`);
      writeRandomModel(src, { variant: 'qwen2', hiddenSize: 128, intermediateSize: 256, numHeads: 4, numKvHeads: 2, numLayers: 2, dtype: 'f16', seed: 9 });
      const dst = join(work, `mlx-${q.bits}`);
      const exp = join(work, `exp-${q.bits}`);
      mlxify(src, dst, exp, q);
      const want = await logits(exp, tokens);
      const got = await logits(dst, tokens);
      expect([...got]).toEqual([...want]);
      const split = await logits(dst, tokens, 2);
      expect(split.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i])), 0)).toBeLessThan(1e-4);
      // And the quantization is real: the MLX model differs from the unquantized one.
      const orig = await logits(src, tokens);
      expect(orig.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i])), 0)).toBeGreaterThan(0);
    });
  }

  it('refuses misaligned group splits and a config.json that disagrees with the tensors', () => {
    const src = join(work, 'src-bad');
    writeRandomModel(src, { variant: 'llama', hiddenSize: 128, intermediateSize: 256, numHeads: 4, numKvHeads: 2, numLayers: 1, dtype: 'f16' });
    const dst = join(work, 'mlx-bad');
    mlxify(src, dst, join(work, 'exp-bad'), { bits: 4, groupSize: 128 });
    // o_proj columns of rank 0 of 2 end at 64, inside a 128-group.
    expect(() => loadInProcessModel(dst, { tensor: 2 })).toThrow(UnsupportedModelError);
    expect(() => loadInProcessModel(dst, { tensor: 2 })).toThrow(/cannot split model\.layers\.0\.self_attn\.o_proj\.weight \(MLX 4-bit, groups of 128\) at columns \[0, 64\)/);

    const lying = join(work, 'mlx-lying');
    mlxify(src, lying, join(work, 'exp-lying'), { bits: 4, groupSize: 64 }, { group_size: 64, bits: 8 });
    expect(() => loadInProcessModel(lying)).toThrow(ModelFormatError);
    expect(() => loadInProcessModel(lying)).toThrow(/config\.json: quantization says bits 8, group_size 64 but model\.layers\.0\.self_attn\.q_proj\.weight .* is 4-bit with groups of 64/);
  });
});
