import { describe, expect, it } from 'vitest';
import { InputError } from '../src/errors.js';
import { modelFromConfig, withTensorSizes } from '../src/model.js';
import { denseConfig, fixture, model } from './helpers.js';

const B = 1e9;

describe('model sizing from config.json', () => {
  it('counts dense Llama parameters to the published sizes', () => {
    expect(model('llama-3.1-8b').totalParams / B).toBeCloseTo(8.03, 1);
    expect(model('llama-3.3-70b').totalParams / B).toBeCloseTo(70.55, 1);
    // bf16: two bytes a parameter, every one read per token (bar the embedding rows).
    const m = model('llama-3.1-8b');
    expect(m.totalBytes).toBeCloseTo(m.totalParams * 2, -3);
    expect(m.layers.every((l) => l.kind === 'dense' && l.activeBytes === l.bytes)).toBe(true);
  });

  it('sizes MoE models: total vs active parameters', () => {
    const q = model('qwen3-235b-a22b');
    expect(q.totalParams / B).toBeGreaterThan(233);
    expect(q.totalParams / B).toBeLessThan(237);
    expect(q.activeParams / B).toBeGreaterThan(21);
    expect(q.activeParams / B).toBeLessThan(23);
    expect(q.moe).toMatchObject({ experts: 128, expertsPerToken: 8, moeLayers: 94 });
    const d = model('deepseek-v3.1');
    expect(d.totalParams / B).toBeGreaterThan(669);
    expect(d.totalParams / B).toBeLessThan(673);
    expect(d.activeParams / B).toBeGreaterThan(36);
    expect(d.activeParams / B).toBeLessThan(38.5);
    // first_k_dense_replace = 3: layers 0-2 are dense and carry no router.
    expect(d.layers.slice(0, 3).every((l) => l.kind === 'dense')).toBe(true);
    expect(d.moe?.moeLayers).toBe(58);
    const k = model('kimi-k2-thinking');
    expect(k.totalParams / 1e12).toBeGreaterThan(1.0);
    expect(k.totalParams / 1e12).toBeLessThan(1.05);
    expect(k.activeParams / B).toBeGreaterThan(31);
    expect(k.activeParams / B).toBeLessThan(34);
  });

  it('sizes Mixtral (num_local_experts, experts as wide as intermediate_size)', () => {
    const m = model('mixtral-8x7b');
    expect(m.totalParams / B).toBeCloseTo(46.7, 1);
    // Mistral's 12.9B "active" counts the embedding matrix; we count one row of it per token.
    expect((m.activeParams + 32000 * 4096) / B).toBeCloseTo(12.9, 1);
    expect(m.moe).toMatchObject({ experts: 8, expertsPerToken: 2, sharedExperts: 0, moeLayers: 32 });
  });

  it('uses the MLA latent for the KV cache and GQA heads otherwise', () => {
    // f32 values, as the engine caches them (kvCacheValuesPerToken).
    expect(model('deepseek-v3.1').kvBytesPerTokenPerLayer).toBe((512 + 64) * 4);
    expect(model('deepseek-v3.1').kvReplicated).toBe(true);
    expect(model('qwen3-235b-a22b').kvBytesPerTokenPerLayer).toBe(2 * 4 * 128 * 4);
    expect(model('llama-3.3-70b').kvBytesPerTokenPerLayer).toBe(2 * 8 * 128 * 4);
  });

  it('reads bits from quantization_config, MLX quantization, dtype, or --bits', () => {
    const fp8 = model('deepseek-v3.1');
    expect(fp8.format).toMatch(/fp8/);
    expect(fp8.totalBytes / fp8.totalParams).toBeGreaterThan(0.99);
    expect(fp8.totalBytes / fp8.totalParams).toBeLessThan(1.01);
    const mlx = model('mistral-7b-mlx-4bit');
    expect(mlx.totalBytes / mlx.totalParams).toBeCloseTo(4.5 / 8, 2);
    const forced = model('deepseek-v3.1', 4);
    expect(forced.totalBytes / forced.totalParams).toBeCloseTo(4.5 / 8, 2);
    // Kimi's compressed-tensors config keeps attention and shared experts in bf16 ("ignore").
    const kimi = model('kimi-k2-thinking');
    const layer = kimi.layers[5];
    const attentionParams = 1536 * 64 * 192 + 512 * 64 * 256 + 64 * 128 * 7168;
    expect(layer.headBytes).toBe(attentionParams * 2);
    const int4 = model('kimi-k2-thinking', 4);
    expect(kimi.activeBytesPerToken).toBeGreaterThan(1.5 * int4.activeBytesPerToken);
  });

  it('names the offending field for bad configs', () => {
    const bad = (over: Record<string, unknown>) => () => modelFromConfig(denseConfig(over));
    expect(bad({ hidden_size: undefined })).toThrow(/hidden_size is missing/);
    expect(bad({ num_hidden_layers: -2 })).toThrow(/num_hidden_layers must be a positive integer/);
    expect(bad({ num_key_value_heads: 7 })).toThrow(/num_key_value_heads \(7\) must divide num_attention_heads/);
    expect(bad({ quantization_config: { quant_method: 'hqq' } })).toThrow(/quantization_config.quant_method "hqq" is not supported/);
    expect(bad({ torch_dtype: 'int3' })).toThrow(/torch_dtype/);
    expect(() => modelFromConfig([1, 2])).toThrow(InputError);
  });

  it('replaces estimates with exact safetensors sizes, skipping layers past num_hidden_layers', () => {
    const config = denseConfig({ num_hidden_layers: 2 });
    const tensors = [
      { name: 'model.embed_tokens.weight', bytes: 1000 },
      { name: 'lm_head.weight', bytes: 1000 },
      { name: 'model.norm.weight', bytes: 10 },
      ...[0, 1, 2].flatMap((i) => [
        { name: `model.layers.${i}.self_attn.q_proj.weight`, bytes: 400 },
        { name: `model.layers.${i}.self_attn.k_proj.weight`, bytes: 100 },
        { name: `model.layers.${i}.mlp.down_proj.weight`, bytes: 500 },
        { name: `model.layers.${i}.input_layernorm.weight`, bytes: 7 },
      ]),
    ];
    const m = withTensorSizes(config, tensors);
    expect(m.bytesFrom).toBe('safetensors');
    expect(m.layers.map((l) => l.bytes)).toEqual([1007, 1007]);
    expect(m.layers[0]).toMatchObject({ headBytes: 400, kvHeadBytes: 100, mlpBytes: 500, replicatedBytes: 7 });
    expect(m.totalBytes).toBe(1000 + 1010 + 2 * 1007);
    // Flops still come from the config's parameter counts.
    expect(m.layers[0].flopsPerToken).toBe(modelFromConfig(config).layers[0].flopsPerToken);
  });

  it('reads multimodal configs from text_config', () => {
    const m = modelFromConfig({ architectures: ['X'], text_config: denseConfig(), torch_dtype: 'bfloat16' });
    expect(m.numLayers).toBe(32);
  });

  it('is fixture-faithful: Qwen3 has no dense layers and 94 MoE layers', () => {
    expect(fixture('qwen3-235b-a22b').num_hidden_layers).toBe(94);
    expect(model('qwen3-235b-a22b').layers.filter((l) => l.kind === 'dense')).toHaveLength(0);
  });
});
