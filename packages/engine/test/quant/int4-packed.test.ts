/**
 * compressed-tensors `pack-quantized` INT4 (Kimi-K2-Thinking's routed experts), kept in 4 bits:
 * - the packing as compressed-tensors' pack_to_int32 defines it (8 weights per int32, weight i at bits
 *   4i, stored as q + 8) read back through the MLX 4-bit row layout it is kept in;
 * - random Kimi-K2 models written as Kimi-K2-Thinking ships (writeInt4PackedModel): the reference
 *   backend gives exactly the logits of the F32 model of q·scale, whole, as 2 pipeline stages and as 2
 *   expert ranks; the WASM kernels give its greedy tokens; the experts stay at 4 bits;
 * - inconsistent files and configs refused by name.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createReferenceBackend, createWasmBackend, generate, loadInProcessModel, loadModelConfig, loadShard, ModelFormatError, UnsupportedModelError } from '@orchard/engine';
import { kimiInt4QuantizationConfig, writeInt4PackedModel, writeRandomModel } from '@orchard/engine/testing';
import { quantizeInt4Packed } from '../../src/quant/int4-packed.js';
import { mlxQ } from '../../src/quant/mlx.js';
import { isIgnored } from '../../src/config/quantization.js';
import type { MoeWeights } from '../../src/model/weights.js';

const work = mkdtempSync(join(tmpdir(), 'orchard-int4-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('pack-quantized INT4 packing', () => {
  it('weight i of each int32 sits at bits 4i as q + 8, which the MLX 4-bit bit stream reads back', () => {
    // one row of 64 weights, each an exact multiple of its group's scale
    const q = Array.from({ length: 64 }, (_, i) => ((i * 5 + 3) % 16) - 8);
    const scale = [0.5, 0.25];
    const values = Float32Array.from(q, (v, i) => v * scale[i >> 5]);
    // scales as the quantizer derives them (amax/7.5 rounded by `round`): force the chosen ones
    const { words, scales } = quantizeInt4Packed(values, 1, 64, 32, (s) => (s > 0.3 ? 0.5 : 0.25));
    expect([...scales]).toEqual(scale);
    for (let w = 0; w < 8; w++) {
      // pack_to_int32: Σ (q + 8) << 4i over the word's 8 weights (as an int32)
      let want = 0;
      for (let i = 0; i < 8; i++) want |= (q[w * 8 + i] + 8) << (4 * i);
      expect(words[w]).toBe(want);
    }
    const bytes = new Uint8Array(words.buffer);
    for (let j = 0; j < 64; j++) expect(mlxQ(bytes, 0, 4, j) - 8).toBe(q[j]);
  });

  it('ignore entries: exact module names, and re: patterns matched from the start (Python re.match)', () => {
    const ignore = kimiInt4QuantizationConfig().ignore as string[];
    expect(isIgnored(ignore, 'lm_head')).toBe(true);
    expect(isIgnored(ignore, 'model.layers.3.self_attn.kv_b_proj')).toBe(true);
    expect(isIgnored(ignore, 'model.layers.3.mlp.shared_experts.down_proj')).toBe(true);
    expect(isIgnored(ignore, 'model.layers.0.mlp.gate_proj')).toBe(true);
    expect(isIgnored(ignore, 'model.layers.3.mlp.experts.7.gate_proj')).toBe(false);
    expect(isIgnored(['re:layers'], 'model.layers.1.mlp.experts.0.up_proj')).toBe(false);
  });
});

const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

describe('Kimi-K2-Thinking INT4 checkpoints', () => {
  const prompt = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100];
  const src = join(work, 'src');
  const dst = join(work, 'int4');
  const ref = join(work, 'ref');
  writeRandomModel(src, { variant: 'deepseek-v3', kimiLayout: true, hiddenSize: 64, numHeads: 4, numLayers: 3, moeIntermediateSize: 64, numExperts: 8, dtype: 'bf16', seed: 9 });
  writeInt4PackedModel(src, dst, { shards: 3, referenceDir: ref });

  const run = async (dir: string, options: Parameters<typeof loadInProcessModel>[1], tokens = 0) => {
    const m = loadInProcessModel(dir, options);
    try {
      const logits = Float32Array.from(await m.newSession().forward(prompt));
      return { logits, tokens: tokens ? (await generate(m, prompt, { maxTokens: tokens, temperature: 0, stopTokenIds: [] })).tokens : [] };
    } finally {
      m.dispose();
    }
  };

  it('is written as Kimi-K2-Thinking ships it: experts pack-quantized, the rest BF16, compressed-tensors config', () => {
    const config = JSON.parse(readFileSync(join(dst, 'config.json'), 'utf8'));
    expect(config.quantization_config.quant_method).toBe('compressed-tensors');
    expect(config.quantization_config.format).toBe('pack-quantized');
    expect(loadModelConfig(dst).weightQuant).toEqual({ method: 'compressed-tensors', bits: 4, groupSize: 32, ignore: config.quantization_config.ignore });
    const index = JSON.parse(readFileSync(join(dst, 'model.safetensors.index.json'), 'utf8'));
    const header = (t: string) => {
      const buf = readFileSync(join(dst, index.weight_map[t]));
      return JSON.parse(buf.subarray(8, 8 + Number(buf.readBigUInt64LE(0))).toString())[t];
    };
    const e = 'model.layers.1.mlp.experts.5.down_proj';
    expect(header(`${e}.weight_packed`)).toMatchObject({ dtype: 'I32', shape: [64, 8] });
    expect(header(`${e}.weight_scale`)).toMatchObject({ dtype: 'BF16', shape: [64, 2] });
    expect(header(`${e}.weight_shape`)).toMatchObject({ dtype: 'I32', shape: [2] });
    expect(index.weight_map[`${e}.weight`]).toBeUndefined();
    expect(header('model.layers.1.mlp.shared_experts.down_proj.weight').dtype).toBe('BF16');
    expect(header('model.layers.0.mlp.gate_proj.weight').dtype).toBe('BF16');
    expect(header('model.layers.1.self_attn.kv_b_proj.weight').dtype).toBe('BF16');
    expect(header('model.layers.1.mlp.gate.weight').dtype).toBe('BF16');
  });

  it('reference backend: exactly the logits of the F32 model of q·scale, whole, PP-2 and 2 expert ranks', async () => {
    const want = await run(ref, { backend: createReferenceBackend });
    expect([...(await run(dst, { backend: createReferenceBackend })).logits]).toEqual([...want.logits]);
    expect([...(await run(dst, { backend: createReferenceBackend, pipeline: 2 })).logits]).toEqual([...want.logits]);
    expect([...(await run(dst, { backend: createReferenceBackend, tensor: 2 })).logits]).toEqual([...(await run(ref, { backend: createReferenceBackend, tensor: 2 })).logits]);
    expect(maxDiff((await run(src, { backend: createReferenceBackend })).logits, want.logits)).toBeGreaterThan(0);
  }, 60_000);

  it('WASM kernels (packed 4-bit): the greedy tokens of the float reference, unsplit, PP-2 and 2 expert ranks', async () => {
    const wasm = () => createWasmBackend({ threads: 1 });
    const want = await run(ref, { backend: createReferenceBackend }, 16);
    const got = await run(dst, { backend: wasm }, 16);
    expect(maxDiff(got.logits, want.logits)).toBeLessThan(2e-3);
    expect(got.tokens).toEqual(want.tokens);
    expect((await run(dst, { backend: wasm, pipeline: 2 }, 16)).tokens).toEqual(want.tokens);
    expect((await run(dst, { backend: wasm, tensor: 2 }, 16)).tokens).toEqual(want.tokens);
  }, 120_000);

  it('keeps the experts at 4 bits (+ a scale and its −8·scale per 32 weights), nothing widened', () => {
    const shard = loadShard(dst, { layers: [0, 3], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend: createReferenceBackend() });
    const moe = shard.weights.layers[1].mlp as MoeWeights;
    expect(moe.experts).toHaveLength(8);
    for (const x of moe.experts) {
      for (const w of [x.gate, x.up, x.down]) {
        expect(w.dtype).toBe('mlx4_g32_bf16');
        expect(w.bytes.byteLength).toBe(w.rows * (w.cols / 2 + (w.cols / 32) * 4));
      }
    }
    expect(moe.shared!.down.dtype).toBe('bf16');
  });

  const variant = (name: string, edit: (c: Record<string, unknown>) => void) => {
    const dir = join(work, name);
    writeInt4PackedModel(src, dir, { shards: 1 });
    const c = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    edit(c);
    writeFileSync(join(dir, 'config.json'), JSON.stringify(c));
    return () => loadShard(dir, { layers: [0, 3], tensor: { rank: 0, size: 1 }, embed: true, head: true });
  };

  it('refuses files that disagree with quantization_config, naming tensor and file', () => {
    const noConfig = variant('no-config', (c) => delete c.quantization_config);
    expect(noConfig).toThrow(ModelFormatError);
    expect(noConfig).toThrow(/model-00001-of-000001\.safetensors: model\.layers\.1\.mlp\.experts\.0\.gate_proj\.weight_packed is pack-quantized but config\.json's quantization_config does not declare compressed-tensors/);
    const group = variant('group64', (c) => ((c.quantization_config as { config_groups: { group_0: { weights: { group_size: number } } } }).config_groups.group_0.weights.group_size = 64));
    expect(group).toThrow(/weight_scale: must be BF16\/F16\/F32 \[64, 1\] \(groups of 64\), got BF16 \[64,2\]/);
    const ignored = variant('ignored', (c) => (c.quantization_config as { ignore: string[] }).ignore.push('re:.*experts.*'));
    expect(ignored).toThrow(/module model\.layers\.1\.mlp\.experts\.0\.gate_proj is in quantization_config\.ignore/);
  });

  it('refuses a weight_shape that disagrees with the tensors, naming it', () => {
    const dir = join(work, 'shape');
    writeInt4PackedModel(src, dir, { shards: 1 });
    const file = join(dir, 'model-00001-of-000001.safetensors');
    const buf = readFileSync(file);
    const hl = Number(buf.readBigUInt64LE(0));
    const name = 'model.layers.2.mlp.experts.3.up_proj.weight_shape';
    const entry = JSON.parse(buf.subarray(8, 8 + hl).toString())[name];
    buf.writeInt32LE(63, 8 + hl + entry.data_offsets[0] + 4); // [64, 64] -> [64, 63]
    writeFileSync(file, buf);
    expect(() => loadShard(dir, { layers: [0, 3], tensor: { rank: 0, size: 1 }, embed: true, head: true })).toThrow(
      /model-00001-of-000001\.safetensors: model\.layers\.2\.mlp\.experts\.3\.up_proj\.weight_shape says \[64,63\], but .*weight_packed holds \[64, 64\]/,
    );
  });

  it('refuses compressed-tensors schemes it does not load, naming the field', () => {
    const bits8 = variant('bits8', (c) => ((c.quantization_config as { config_groups: { group_0: { weights: { num_bits: number } } } }).config_groups.group_0.weights.num_bits = 8));
    expect(bits8).toThrow(UnsupportedModelError);
    expect(bits8).toThrow(/quantization_config\.config_groups\.group_0\.weights\.num_bits 8 is not supported/);
    const asym = variant('asym', (c) => ((c.quantization_config as { config_groups: { group_0: { weights: { symmetric: boolean } } } }).config_groups.group_0.weights.symmetric = false));
    expect(asym).toThrow(/weights\.symmetric false is not supported/);
    const fmt = variant('fmt', (c) => ((c.quantization_config as { format: string }).format = 'marlin-24'));
    expect(fmt).toThrow(/quantization_config\.format "marlin-24" is not supported/);
    const acts = variant('acts', (c) => ((c.quantization_config as { config_groups: { group_0: { input_activations: unknown } } }).config_groups.group_0.input_activations = { num_bits: 8 }));
    expect(acts).toThrow(/input_activations is set/);
  });
});
