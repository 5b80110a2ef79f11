/**
 * FP8 block-scaled checkpoints (DeepSeek V3/R1, Kimi K2, Qwen3 FP8: F8_E4M3 weights + weight_scale_inv
 * per 128×128 block), kept in 8 bits:
 * - every E4M3 code's value against the bit-level definition computed another way (the f32 whose bits
 *   are the code's shifted into place, times 2^120) and against fixed points of the format;
 * - the WASM kernel against the plain dequantize-then-f32 product, on short blocks and odd shapes (prompt
 *   batches on the 32-column grid against the q8_0 integer tiles' reference);
 * - random DeepSeek-V3 models written as DeepSeek's release is (writeFp8Model): the reference backend
 *   gives exactly the logits of the F32 model of the dequantized weights, whole, as 2 pipeline stages
 *   and as 2 tensor ranks; the WASM kernels give its greedy tokens; the weights stay one byte each;
 * - off-block column splits, missing scales and other quantization methods refused by name.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createReferenceBackend, createWasmBackend, generate, loadInProcessModel, loadModelConfig, loadShard, ModelFormatError, UnsupportedModelError } from '@orchard/engine';
import { writeFp8Model, writeRandomModel } from '@orchard/engine/testing';
import { E4M3_TO_F32, f32ToE4M3, packFp8, quantizeFp8Blocks } from '../../src/quant/fp8.js';
import { rowBytes } from '../../src/kernels/wasm/formats.js';
import { q8TilesOutput } from '../../src/kernels/wasm/quant-reference.js';
import { layerMatrices } from '../../src/model/weights.js';
import type { MlaWeights } from '../../src/model/weights.js';
import { Prng } from '../../src/numeric/prng.js';

const work = mkdtempSync(join(tmpdir(), 'orchard-fp8-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('E4M3 decoding', () => {
  it('all 256 codes: the f32 of the code bits shifted into place times 2^120, NaN at 0x7f/0xff', () => {
    const bits = new DataView(new ArrayBuffer(4));
    for (let c = 0; c < 256; c++) {
      bits.setUint32(0, ((c & 0x80) << 24) | ((c & 0x7f) << 20));
      const want = (c & 0x7f) === 0x7f ? NaN : bits.getFloat32(0) * 2 ** 120;
      expect(Object.is(E4M3_TO_F32[c], want) || (Number.isNaN(want) && Number.isNaN(E4M3_TO_F32[c])), `code 0x${c.toString(16)}`).toBe(true);
    }
  });

  it('fixed points: ±448 max, 2^-9 smallest subnormal, 2^-6 smallest normal, 1, ±0', () => {
    expect(E4M3_TO_F32[0x7e]).toBe(448);
    expect(E4M3_TO_F32[0xfe]).toBe(-448);
    expect(E4M3_TO_F32[0x01]).toBe(2 ** -9);
    expect(E4M3_TO_F32[0x07]).toBe(7 * 2 ** -9);
    expect(E4M3_TO_F32[0x08]).toBe(2 ** -6);
    expect(E4M3_TO_F32[0x38]).toBe(1);
    expect(E4M3_TO_F32[0x39]).toBe(1.125);
    expect(Object.is(E4M3_TO_F32[0x80], -0)).toBe(true);
    expect(E4M3_TO_F32[0x00]).toBe(0);
    expect(Number.isNaN(E4M3_TO_F32[0x7f]) && Number.isNaN(E4M3_TO_F32[0xff])).toBe(true);
    // strictly increasing over the non-negative finite codes
    for (let c = 1; c < 0x7f; c++) expect(E4M3_TO_F32[c]).toBeGreaterThan(E4M3_TO_F32[c - 1]);
  });

  it('rounding to E4M3: every code round-trips; midpoints go to the even code; saturates at 448', () => {
    for (let c = 0; c < 256; c++) if ((c & 0x7f) !== 0x7f) expect(f32ToE4M3(E4M3_TO_F32[c])).toBe(c);
    expect(f32ToE4M3(1.0625)).toBe(0x38); // between 1 (0x38) and 1.125 (0x39)
    expect(f32ToE4M3(1.1875)).toBe(0x3a); // between 1.125 and 1.25 (0x3a)
    expect(f32ToE4M3(1.07)).toBe(0x39);
    expect(f32ToE4M3(1000)).toBe(0x7e);
    expect(f32ToE4M3(-1000)).toBe(0xfe);
    expect(f32ToE4M3(2 ** -10)).toBe(0x00); // half the smallest subnormal: ties to even (0)
  });
});

describe('fp8_e4m3 kernels', () => {
  const shapes: Array<[number, number]> = [
    [7, 300], // blocks of 128, 128, 44 (a 16-column vector tail and a scalar tail)
    [9, 128],
    [5, 1000],
    [4, 13],
  ];
  const rng = new Prng(7);
  for (const [rows, cols] of shapes) {
    it(`[${rows}, ${cols}]: WASM matvec and matmul = dequantize-then-f32 within f32 rounding (1 and 2 threads)`, () => {
      const values = Float32Array.from({ length: rows * cols }, () => (rng.next() - 0.5) * (rng.next() < 0.1 ? 1e-4 : 1));
      const { codes, scaleInv } = quantizeFp8Blocks(values, rows, cols);
      codes[3] = 0x01; // a subnormal
      codes[5] = 0x86;
      const n = 3;
      const x = Float32Array.from({ length: cols * n }, () => rng.next() * 2 - 1);
      const ref = createReferenceBackend();
      const rw = { dtype: 'fp8_e4m3' as const, rows, cols, bytes: ref.allocBytes(rows * rowBytes('fp8_e4m3', cols)) };
      packFp8(codes, scaleInv, rows, cols, rw.bytes);
      const want = new Float32Array(rows * n);
      ref.matmul(want, rw, x, n);
      // |error| bound: a few f32 roundings of the sum of magnitudes
      const mag = new Float64Array(rows * n);
      const row = new Float32Array(cols);
      for (let r = 0; r < rows; r++) {
        for (let c = 0; c < cols; c++) row[c] = E4M3_TO_F32[codes[r * cols + c]] * scaleInv[Math.floor(r / 128) * Math.ceil(cols / 128) + Math.floor(c / 128)];
        for (let b = 0; b < n; b++) for (let c = 0; c < cols; c++) mag[b * rows + r] += Math.abs(row[c] * x[b * cols + c]);
      }
      for (const threads of [1, 2]) {
        const be = createWasmBackend({ threads });
        try {
          const w = { dtype: 'fp8_e4m3' as const, rows, cols, bytes: be.allocBytes(rw.bytes.byteLength) };
          w.bytes.set(rw.bytes);
          be.packWeight?.(w);
          const xs = be.allocF32(cols * n);
          xs.set(x);
          const out = be.allocF32(rows * n);
          be.matmul(out, w, xs, n);
          const one = be.allocF32(rows);
          be.matvec(one, w, xs.subarray(0, cols));
          for (let r = 0; r < rows; r++) expect(Math.abs(one[r] - want[r]), `[${r}]`).toBeLessThanOrEqual(4 * (cols + 8) * 2 ** -24 * mag[r] + 1e-30);
          if (cols % 32 !== 0) {
            for (let i = 0; i < rows * n; i++) expect(Math.abs(out[i] - want[i]), `[${i}]`).toBeLessThanOrEqual(4 * (cols + 8) * 2 ** -24 * mag[i] + 1e-30);
            // a batch row = the one-token product, bit for bit
            for (let r = 0; r < rows; r++) expect(one[r]).toBe(out[r]);
          } else {
            // on the 32-column grid a batch runs q8_0's integer tiles: exactly their reference's result
            // (test/wasm/prompt-tiles.test.ts bounds it against the exact product), the rows%4 tail exact
            const tiles = q8TilesOutput('fp8_e4m3', w.bytes, rows, cols, xs, n);
            const g = rows - (rows % 4);
            for (let b = 0; b < n; b++) {
              for (let r = 0; r < rows; r++) {
                const i = b * rows + r;
                if (r < g) expect(out[i], `[${i}]`).toBe(tiles[i]);
                else expect(Math.abs(out[i] - want[i]), `[${i}]`).toBeLessThanOrEqual(4 * (cols + 8) * 2 ** -24 * mag[i] + 1e-30);
              }
            }
          }
        } finally {
          be.dispose?.();
        }
      }
    });
  }
});

const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

describe('DeepSeek-V3 FP8 checkpoints', () => {
  const prompt = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100];
  const src = join(work, 'src');
  const dst = join(work, 'fp8');
  const ref = join(work, 'ref');
  // wide enough that o_proj (4 heads × v 64), the dense down_proj and the shared expert split at a 128-column block
  writeRandomModel(src, {
    variant: 'deepseek-v3',
    hiddenSize: 64,
    numHeads: 4,
    numLayers: 3,
    intermediateSize: 256,
    moeIntermediateSize: 256,
    numExperts: 8,
    mlaDims: { nopeDim: 64, vDim: 64 },
    dtype: 'bf16',
    seed: 5,
  });
  writeFp8Model(src, dst, { shards: 3, referenceDir: ref });

  const run = async (dir: string, options: Parameters<typeof loadInProcessModel>[1], tokens = 0) => {
    const m = loadInProcessModel(dir, options);
    try {
      const logits = Float32Array.from(await m.newSession().forward(prompt));
      return { logits, tokens: tokens ? (await generate(m, prompt, { maxTokens: tokens, temperature: 0, stopTokenIds: [] })).tokens : [] };
    } finally {
      m.dispose();
    }
  };

  it('is written as DeepSeek ships it: F8_E4M3 + F32 weight_scale_inv, BF16 around them, quantization_config', () => {
    const config = JSON.parse(readFileSync(join(dst, 'config.json'), 'utf8'));
    expect(config.quantization_config).toEqual({ activation_scheme: 'dynamic', fmt: 'e4m3', quant_method: 'fp8', weight_block_size: [128, 128] });
    expect(loadModelConfig(dst).weightQuant).toEqual({ method: 'fp8', blockSize: [128, 128] });
    const index = JSON.parse(readFileSync(join(dst, 'model.safetensors.index.json'), 'utf8'));
    const files = new Set(Object.values(index.weight_map));
    expect(files.size).toBe(3);
    const header = (t: string) => {
      const f = join(dst, index.weight_map[t]);
      const buf = readFileSync(f);
      return JSON.parse(buf.subarray(8, 8 + Number(buf.readBigUInt64LE(0))).toString())[t];
    };
    expect(header('model.layers.0.self_attn.kv_a_proj_with_mqa.weight')).toMatchObject({ dtype: 'F8_E4M3', shape: [40, 64] });
    expect(header('model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv')).toMatchObject({ dtype: 'F32', shape: [1, 1] });
    expect(header('model.layers.1.mlp.experts.3.down_proj.weight_scale_inv')).toMatchObject({ dtype: 'F32', shape: [1, 2] });
    expect(header('model.layers.1.mlp.gate.weight').dtype).toBe('BF16');
    expect(header('model.layers.1.mlp.gate.e_score_correction_bias').dtype).toBe('F32');
    expect(header('model.embed_tokens.weight').dtype).toBe('BF16');
    expect(header('lm_head.weight').dtype).toBe('BF16');
    expect(header('model.layers.0.self_attn.kv_a_layernorm.weight').dtype).toBe('BF16');
  });

  it('reference backend: exactly the logits of the dequantized F32 model, whole, PP-2 and TP-2', async () => {
    const want = await run(ref, { backend: createReferenceBackend });
    expect([...(await run(dst, { backend: createReferenceBackend })).logits]).toEqual([...want.logits]);
    expect([...(await run(dst, { backend: createReferenceBackend, pipeline: 2 })).logits]).toEqual([...want.logits]);
    const tp = await run(dst, { backend: createReferenceBackend, tensor: 2 });
    expect([...tp.logits]).toEqual([...(await run(ref, { backend: createReferenceBackend, tensor: 2 })).logits]);
    expect(maxDiff(tp.logits, want.logits)).toBeLessThan(1e-4);
    // the quantization is real
    expect(maxDiff((await run(src, { backend: createReferenceBackend })).logits, want.logits)).toBeGreaterThan(0);
  }, 60_000);

  it('an FP8 embedding and LM head (some conversions): exactly the dequantized model, whole and TP-2', async () => {
    const dir = join(work, 'fp8-tables');
    const tref = join(work, 'fp8-tables-ref');
    writeFp8Model(src, dir, { shards: 2, referenceDir: tref, embeddings: true });
    const want = await run(tref, { backend: createReferenceBackend });
    expect([...(await run(dir, { backend: createReferenceBackend })).logits]).toEqual([...want.logits]);
    expect([...(await run(dir, { backend: createReferenceBackend, tensor: 2 })).logits]).toEqual([...(await run(tref, { backend: createReferenceBackend, tensor: 2 })).logits]);
    const shard = loadShard(dir, { layers: [0, 1], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend: createReferenceBackend() });
    expect([shard.weights.embed!.dtype, shard.weights.head!.dtype]).toEqual(['fp8_e4m3', 'fp8_e4m3']);
  }, 60_000);

  it('WASM kernels: the greedy tokens of the float reference, unsplit, PP-2 and TP-2', async () => {
    const wasm = () => createWasmBackend({ threads: 1 });
    const want = await run(ref, { backend: createReferenceBackend }, 16);
    const got = await run(dst, { backend: wasm }, 16);
    // the prompt runs as a batch, whose FP8 products take 15-bit integer activations per 32 columns
    // (q8_0's integer tiles): close to f32, not bit-equal
    expect(maxDiff(got.logits, want.logits)).toBeLessThan(1e-3);
    expect(got.tokens).toEqual(want.tokens);
    expect((await run(dst, { backend: wasm, pipeline: 2 }, 16)).tokens).toEqual(want.tokens);
    expect((await run(dst, { backend: wasm, tensor: 2 }, 16)).tokens).toEqual(want.tokens);
  }, 120_000);

  it('keeps one byte per weight plus its block scales, kv_b_proj heads (absorbed, transposed) included', () => {
    const shard = loadShard(dst, { layers: [0, 3], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend: createReferenceBackend() });
    let fp8 = 0;
    for (const layer of shard.weights.layers) {
      expect((layer.attention as MlaWeights).kb).toHaveLength(4);
      for (const w of layerMatrices(layer)) {
        if (w === (layer.mlp.kind === 'moe' ? layer.mlp.router : null)) continue;
        expect(w.dtype).toBe('fp8_e4m3');
        expect(w.bytes.byteLength).toBe(w.rows * (w.cols + 4 * Math.ceil(w.cols / 128)));
        fp8++;
      }
    }
    expect(fp8).toBeGreaterThan(30);
  });

  it('refuses a column split inside a 128-column block, with the numbers; heads off 128-row blocks still load (their keys in f32)', async () => {
    const narrow = join(work, 'narrow');
    const nsrc = join(work, 'narrow-src');
    writeRandomModel(nsrc, { variant: 'deepseek-v3', hiddenSize: 64, numHeads: 4, numLayers: 2, dtype: 'bf16', seed: 3 });
    writeFp8Model(nsrc, narrow, { shards: 1, referenceDir: join(work, 'narrow-ref') });
    // o_proj has 4 heads × 16 = 64 columns: two ranks would cut it at column 32
    const load = () => loadShard(narrow, { layers: [0, 2], tensor: { rank: 0, size: 2 }, embed: true, head: true }, { allReduce: async () => {} });
    expect(load).toThrow(UnsupportedModelError);
    // kv_b_proj has 32 rows per head: heads 1-3 start inside a block, so the absorbed keys fall back to f32
    const shard = loadShard(narrow, { layers: [0, 2], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend: createReferenceBackend() });
    expect((shard.weights.layers[0].attention as MlaWeights).kb.map((w) => w.dtype)).toEqual(['f32', 'f32', 'f32', 'f32']);
    expect((shard.weights.layers[0].attention as MlaWeights).vb.map((w) => w.dtype)).toEqual(['fp8_e4m3', 'fp8_e4m3', 'fp8_e4m3', 'fp8_e4m3']);
    expect([...(await run(narrow, { backend: createReferenceBackend })).logits]).toEqual([...(await run(join(work, 'narrow-ref'), { backend: createReferenceBackend })).logits]);
    expect(load).toThrow(/o_proj\.weight \(fp8, 128×128 blocks\) at columns \[0, 32\)/);
  });

  it('refuses a missing weight_scale_inv naming tensor and file', () => {
    const broken = join(work, 'broken');
    writeFp8Model(src, broken, { shards: 1 });
    const index = JSON.parse(readFileSync(join(broken, 'model.safetensors.index.json'), 'utf8'));
    delete index.weight_map['model.layers.0.self_attn.o_proj.weight_scale_inv'];
    writeFileSync(join(broken, 'model.safetensors.index.json'), JSON.stringify(index));
    expect(() => loadShard(broken, { layers: [0, 1], tensor: { rank: 0, size: 1 }, embed: true, head: false })).toThrow(ModelFormatError);
    expect(() => loadShard(broken, { layers: [0, 1], tensor: { rank: 0, size: 1 }, embed: true, head: false })).toThrow(/model-00001-of-000001\.safetensors: FP8 tensor model\.layers\.0\.self_attn\.o_proj\.weight has no .*weight_scale_inv/);
  });
});

describe('Qwen3 FP8 checkpoints (BF16 / F16 weight_scale_inv)', () => {
  const prompt = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100];
  const src = join(work, 'qwen-src');
  writeRandomModel(src, { variant: 'qwen3-moe', hiddenSize: 64, numHeads: 4, numKvHeads: 2, headDim: 64, numLayers: 2, intermediateSize: 256, dtype: 'bf16', seed: 8 });
  for (const scaleDtype of ['BF16', 'F16'] as const) {
    it(`${scaleDtype} scales: exactly the logits of the dequantized F32 model, whole and TP-2; WASM greedy tokens`, async () => {
      const dst = join(work, `qwen-${scaleDtype}`);
      const ref = join(work, `qwen-ref-${scaleDtype}`);
      writeFp8Model(src, dst, { shards: 2, referenceDir: ref, scaleDtype });
      const index = JSON.parse(readFileSync(join(dst, 'model.safetensors.index.json'), 'utf8'));
      const t = 'model.layers.0.mlp.experts.1.up_proj.weight_scale_inv';
      const buf = readFileSync(join(dst, index.weight_map[t]));
      expect(JSON.parse(buf.subarray(8, 8 + Number(buf.readBigUInt64LE(0))).toString())[t].dtype).toBe(scaleDtype);
      const run = async (dir: string, options: Parameters<typeof loadInProcessModel>[1], tokens = 0) => {
        const m = loadInProcessModel(dir, options);
        try {
          const logits = Float32Array.from(await m.newSession().forward(prompt));
          return { logits, tokens: tokens ? (await generate(m, prompt, { maxTokens: tokens, temperature: 0, stopTokenIds: [] })).tokens : [] };
        } finally {
          m.dispose();
        }
      };
      const want = await run(ref, { backend: createReferenceBackend }, 8);
      expect([...(await run(dst, { backend: createReferenceBackend })).logits]).toEqual([...want.logits]);
      // q/k/v, gate/up by rows; o_proj (4 heads × 64) and the dense down_proj (256 columns) split at a block
      expect([...(await run(dst, { backend: createReferenceBackend, tensor: 2 })).logits]).toEqual([...(await run(ref, { backend: createReferenceBackend, tensor: 2 })).logits]);
      expect((await run(dst, { backend: () => createWasmBackend({ threads: 1 }) }, 8)).tokens).toEqual(want.tokens);
    }, 60_000);
  }
});

describe('quantization_config', () => {
  const dir = join(work, 'methods');
  writeRandomModel(dir, { variant: 'llama', hiddenSize: 64, numLayers: 1, seed: 1 });
  const base = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
  const withQuant = (q: unknown) => writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...base, quantization_config: q }));

  for (const method of ['awq', 'gptq', 'bitsandbytes', 'hqq', 'eetq', 'fbgemm_fp8', 'marlin', 'aqlm']) {
    it(`refuses quant_method "${method}" naming the method and the file`, () => {
      withQuant({ quant_method: method, bits: 4 });
      expect(() => loadModelConfig(dir)).toThrow(UnsupportedModelError);
      expect(() => loadModelConfig(dir)).toThrow(new RegExp(`quant_method "${method}" is not supported.*${join(dir, 'config.json').replace(/[.]/g, '\\.')}`));
    });
  }

  it('refuses FP8 variants it does not load, naming the field', () => {
    withQuant({ quant_method: 'fp8', fmt: 'e5m2', weight_block_size: [128, 128] });
    expect(() => loadModelConfig(dir)).toThrow(/quantization_config\.fmt "e5m2"/);
    withQuant({ quant_method: 'fp8', activation_scheme: 'dynamic' });
    expect(() => loadModelConfig(dir)).toThrow(/quantization_config\.weight_block_size is missing/);
    withQuant({ quant_method: 'fp8', weight_block_size: [64, 64] });
    expect(() => loadModelConfig(dir)).toThrow(/weight_block_size \[64,64\]/);
    withQuant({ quant_method: 'fp8', weight_block_size: [128, 128], activation_scheme: 'static' });
    expect(() => loadModelConfig(dir)).toThrow(/activation_scheme "static"/);
  });

  it('passes MLX (no quant_method, or "mlx") and gpt-oss mxfp4 through to their tensor readers', () => {
    withQuant({ group_size: 64, bits: 4 });
    expect(loadModelConfig(dir).weightQuant).toBeUndefined();
    withQuant({ quant_method: 'mxfp4', modules_to_not_convert: ['lm_head'] });
    expect(loadModelConfig(dir).weightQuant).toBeUndefined();
    withQuant({ quant_method: 'mlx', group_size: 64, bits: 4 });
    expect(loadModelConfig(dir).weightQuant).toBeUndefined();
    writeFileSync(join(dir, 'config.json'), JSON.stringify(base));
  });
});
