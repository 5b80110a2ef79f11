/**
 * mlx-community mixture-of-experts conversions, written as mlx-lm's `convert -q` writes them
 * (testing/mlx-moe-model.ts: stacked `switch_mlp` experts, the model's quant_predicate and per-module
 * entries, unquantized leftovers, both MLA forms, `model-0000N-of-0000M` shards + index), kept packed:
 * - on the reference backend the logits equal exactly those of the F32 Hugging Face-layout model of the
 *   same values (loaded by the per-expert path), unsplit; split as 2 pipeline stages and as 2 tensor /
 *   expert ranks within 1e-5 of the logit scale, with the same greedy tokens;
 * - on WASM the greedy tokens equal the float reference's, unsplit, PP-2 and TP-2;
 * - each expert is one byte slab of its stacked tensor: an expert rank reads only its experts' bytes,
 *   and the loaded experts are their packed size;
 * - a config.json that disagrees with the files, and modes other than affine, are refused by name.
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createInProcessAllReduce, createReferenceBackend, createWasmBackend, generate, loadInProcessModel, loadShard, loadShardAsync, type Backend } from '../../src/index.js';
import { layerMatrices, type MlaWeights, type MoeWeights } from '../../src/model/weights.js';
import { weightBytes } from '../../src/kernels/wasm/formats.js';
import { writeMlxMoeModel, writeRandomModel, type MlxMoeModelOptions, type RandomModelOptions } from '../../src/testing/index.js';
import { maxAbsDiff, tempDir } from '../helpers.js';

const tmp = tempDir('mlx-moe');
afterAll(tmp.cleanup);

const TOKENS = [5, 77, 130, 9, 201, 33];
const GREEDY = 8;

interface Case {
  model: RandomModelOptions;
  mlx: Omit<MlxMoeModelOptions, 'referenceDir'>;
  /** Module paths that must be stored unquantized (mlx-lm's leftovers and `false` entries). */
  plain: string[];
}

const CASES: Record<string, Case> = {
  'qwen3-moe 4-bit g32 (router 8-bit g64 by the model predicate, a down_proj 8-bit, an o_proj false, 3 shards)': {
    model: { variant: 'qwen3-moe', numLayers: 3, hiddenSize: 64, moeIntermediateSize: 64, intermediateSize: 128, numExperts: 8, dtype: 'bf16', seed: 21 },
    mlx: {
      bits: 4,
      groupSize: 32,
      overrides: { 'model.layers.2.mlp.switch_mlp.down_proj': { bits: 8, groupSize: 32 }, 'model.layers.0.self_attn.o_proj': false },
      maxShardBytes: 40_000,
    },
    plain: ['model.layers.0.self_attn.o_proj'],
  },
  'mixtral 3-bit g64 (expert down_proj input 96 not whole groups: left bf16)': {
    model: { variant: 'mixtral', numLayers: 2, hiddenSize: 128, intermediateSize: 96, numExperts: 4, dtype: 'bf16', seed: 22 },
    mlx: { bits: 3, groupSize: 64 },
    plain: ['model.layers.0.block_sparse_moe.switch_mlp.down_proj', 'model.layers.1.block_sparse_moe.switch_mlp.down_proj'],
  },
  'deepseek-v3 4-bit g32, MLA split per head (embed_q / unembed_out, mlx-lm since 2026-02)': {
    model: { variant: 'deepseek-v3', numLayers: 3, hiddenSize: 64, numHeads: 4, moeIntermediateSize: 64, intermediateSize: 64, numExperts: 8, firstKDense: 1, mlaDims: { kvLoraRank: 64, nopeDim: 32, ropeDim: 8, vDim: 32 }, dtype: 'bf16', seed: 23 },
    mlx: { bits: 4, groupSize: 32, mla: 'embed_q', maxShardBytes: 60_000 },
    plain: ['model.layers.1.mlp.gate'],
  },
  'kimi-k2 layout 6-bit g32, MLA packed kv_b_proj (mlx-lm before 2026-02)': {
    model: { variant: 'deepseek-v3', kimiLayout: true, numLayers: 2, hiddenSize: 64, numHeads: 4, moeIntermediateSize: 64, intermediateSize: 64, numExperts: 8, firstKDense: 1, mlaDims: { kvLoraRank: 64, nopeDim: 32, ropeDim: 8, vDim: 32 }, dtype: 'bf16', seed: 24 },
    mlx: { bits: 6, groupSize: 32, mla: 'kv_b_proj' },
    plain: [],
  },
  'gpt-oss: experts MXFP4 as released (mode mxfp4), the rest 4-bit g32 per-module entries, router 8-bit g64': {
    model: { variant: 'gpt-oss', numLayers: 2, hiddenSize: 64, intermediateSize: 32, numExperts: 4, dtype: 'bf16', seed: 26 },
    mlx: { bits: 4, groupSize: 32, maxShardBytes: 30_000 },
    plain: [],
  },
  'deepseek-v3 8-bit g32, embed_q input 16 not whole groups: left bf16, unembed_out quantized': {
    model: { variant: 'deepseek-v3', numLayers: 2, hiddenSize: 64, numHeads: 4, moeIntermediateSize: 64, intermediateSize: 64, numExperts: 8, firstKDense: 1, dtype: 'f16', seed: 25 },
    mlx: { bits: 8, groupSize: 32, mla: 'embed_q' },
    plain: ['model.layers.0.self_attn.embed_q', 'model.layers.1.self_attn.embed_q'],
  },
};

async function run(dir: string, backend: () => Backend, split: { pipeline?: number; tensor?: number } = {}) {
  const m = loadInProcessModel(dir, { backend, maxBatch: 8, ...split });
  try {
    const logits = Float32Array.from(await m.newSession().forward(TOKENS));
    const tokens = (await generate(m, TOKENS, { maxTokens: GREEDY, temperature: 0, stopTokenIds: [] })).tokens;
    return { logits, tokens, bytesRead: m.bytesRead };
  } finally {
    m.dispose();
  }
}

function header(path: string): Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }> {
  const buf = readFileSync(path);
  return JSON.parse(buf.subarray(8, 8 + Number(buf.readBigUInt64LE(0))).toString('utf8'));
}

let n = 0;
describe.each(Object.entries(CASES))('%s', (_label, c) => {
  const id = `m${n++}`;
  const src = join(tmp.dir, `${id}-hf`);
  const dst = join(tmp.dir, `${id}-mlx`);
  const ref = join(tmp.dir, `${id}-ref`);
  writeRandomModel(src, c.model);
  writeMlxMoeModel(src, dst, { ...c.mlx, referenceDir: ref });
  const index = JSON.parse(readFileSync(join(dst, 'model.safetensors.index.json'), 'utf8')) as { weight_map: Record<string, string> };
  const has = (t: string) => t in index.weight_map;

  it('is laid out as mlx-lm writes it: stacked experts, per-module entries, leftovers in floats, shards + index', () => {
    const files = readdirSync(dst).filter((f) => f.endsWith('.safetensors'));
    const sharded = c.mlx.maxShardBytes !== undefined;
    if (sharded) {
      expect(files.length).toBeGreaterThan(1);
      files.forEach((f) => expect(f).toMatch(new RegExp(`^model-0000\\d-of-0000${files.length}\\.safetensors$`)));
    } else expect(files).toEqual(['model.safetensors']);
    for (const f of files) expect((header(join(dst, f)) as unknown as { __metadata__: unknown }).__metadata__).toEqual({ format: 'mlx' });
    const names = Object.keys(index.weight_map);
    expect(names.some((t) => /\.experts\.\d+\./.test(t))).toBe(false);
    const gptOss = c.model.variant === 'gpt-oss';
    expect(names.some((t) => t.includes(gptOss ? '.mlp.experts.gate_proj.scales' : '.switch_mlp.gate_proj.scales'))).toBe(true);
    for (const p of c.plain) {
      expect(has(`${p}.weight`), p).toBe(true);
      expect(has(`${p}.scales`), p).toBe(false);
    }
    const cfg = JSON.parse(readFileSync(join(dst, 'config.json'), 'utf8'));
    expect(cfg.quantization).toEqual(cfg.quantization_config);
    expect(cfg.quantization.mode).toBe(gptOss ? 'mxfp4' : 'affine');
    if (gptOss) {
      const h = header(join(dst, index.weight_map['model.layers.0.mlp.experts.down_proj.weight']));
      expect(h['model.layers.0.mlp.experts.down_proj.weight']).toMatchObject({ dtype: 'U32', shape: [4, 64, 4] });
      expect(has('model.layers.0.mlp.experts.down_proj.biases')).toBe(false);
      expect(has('model.layers.0.mlp.experts.down_proj.bias')).toBe(true);
      expect(cfg.quantization['model.layers.0.mlp.router']).toEqual({ group_size: 64, bits: 8 });
      expect(cfg.quantization['model.layers.0.self_attn.q_proj']).toEqual({ group_size: 32, bits: 4, mode: 'affine' });
    }
    if (c.model.variant === 'qwen3-moe') expect(cfg.quantization['model.layers.0.mlp.gate']).toEqual({ group_size: 64, bits: 8 });
    if (c.mlx.mla === 'embed_q') expect(has('model.layers.0.self_attn.kv_b_proj.weight')).toBe(false);
    if (c.mlx.mla === 'kv_b_proj') expect(has('model.layers.0.self_attn.kv_b_proj.scales')).toBe(true);
  });

  it('reference backend: logits equal the dequantized F32 model exactly; PP-2 and expert-split TP-2 give its tokens', async () => {
    const want = await run(ref, createReferenceBackend);
    const whole = await run(dst, createReferenceBackend);
    expect([...whole.logits]).toEqual([...want.logits]);
    expect(whole.tokens).toEqual(want.tokens);
    const scale = want.logits.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
    for (const split of [{ pipeline: 2 }, { tensor: 2 }]) {
      const got = await run(dst, createReferenceBackend, split);
      expect(maxAbsDiff(got.logits, want.logits), JSON.stringify(split)).toBeLessThanOrEqual(1e-5 * scale);
      expect(got.tokens, JSON.stringify(split)).toEqual(want.tokens);
    }
    // the quantization is real: the source model's logits differ
    expect(maxAbsDiff((await run(src, createReferenceBackend)).logits, want.logits)).toBeGreaterThan(0);
  });

  it('WASM: greedy tokens equal the float reference, unsplit, PP-2 and TP-2', async () => {
    const want = await run(ref, createReferenceBackend);
    for (const split of [{}, { pipeline: 2 }, { tensor: 2 }]) {
      const got = await run(dst, () => createWasmBackend({ threads: 1 }), split);
      expect(got.tokens, JSON.stringify(split)).toEqual(want.tokens);
    }
  });

  it('loading without blocking (loadShardAsync, as the daemon does) fills the same bytes', async () => {
    const spec = { layers: [0, c.model.numLayers!] as [number, number], tensor: { rank: 0, size: 1 }, embed: true, head: true };
    const sync = loadShard(dst, spec, { backend: createReferenceBackend() });
    const async_ = await loadShardAsync(dst, spec, { backend: createReferenceBackend() });
    const bytes = (sh: typeof sync) => sh.weights.layers.flatMap(layerMatrices).map((w) => [w.dtype, Buffer.from(w.bytes).toString('base64')]);
    expect(bytes(async_)).toEqual(bytes(sync));
    sync.dispose();
    async_.dispose();
  });

  it('experts stay packed, and an expert rank reads only its own experts’ bytes of the stacked tensors', () => {
    const layers = c.model.numLayers!;
    const l = layers - 1; // a MoE layer in every case
    const reduces = createInProcessAllReduce(2);
    const ranks = [0, 1].map((rank) => loadShard(dst, { layers: [l, l + 1], tensor: { rank, size: 2 }, embed: false, head: false }, { backend: createReferenceBackend(), allReduce: reduces[rank] }));
    const E = c.model.numExperts!;
    const block = c.model.variant === 'mixtral' ? 'block_sparse_moe.switch_mlp' : c.model.variant === 'gpt-oss' ? 'mlp.experts' : 'mlp.switch_mlp';
    const stacked = ['gate_proj', 'up_proj', 'down_proj'].flatMap((p) => ['weight', 'scales', 'biases'].map((k) => `model.layers.${l}.${block}.${p}.${k}`)).filter(has);
    const stackedBytes = stacked.reduce((s, t) => {
      const e = header(join(dst, index.weight_map[t]))[t];
      return s + e.data_offsets[1] - e.data_offsets[0];
    }, 0);
    for (const [r, shard] of ranks.entries()) {
      const moe = shard.weights.layers[0].mlp as MoeWeights;
      expect(moe.firstExpert).toBe((r * E) / 2);
      expect(moe.experts.length).toBe(E / 2);
      const packed = moe.experts.flatMap((e) => [e.gate, e.up, e.down]).filter((w) => !['f32', 'f16', 'bf16'].includes(w.dtype));
      expect(packed.length).toBeGreaterThan(0);
      if (c.model.variant === 'gpt-oss') expect(new Set(packed.map((w) => w.dtype))).toEqual(new Set(['mxfp4']));
      for (const w of packed) expect(w.bytes.byteLength).toBe(weightBytes(w.dtype, w.rows, w.cols));
      const expertBytes = moe.experts.flatMap((e) => [e.gate, e.up, e.down]).reduce((s, w) => s + w.bytes.byteLength, 0);
      // an expert's weights are its slab of the stacked tensors: half of them per rank, byte for byte
      expect(expertBytes).toBe(stackedBytes / 2);
      // and the rank read less than the whole stacked tensors (the rest: attention share, router, norms)
      expect(shard.bytesRead).toBeLessThan(stackedBytes);
      if (c.mlx.mla) {
        const a = shard.weights.layers[0].attention as MlaWeights;
        const want = c.plain.some((p) => p.endsWith('embed_q')) ? /^(bf16|f16)$/ : c.mlx.mla === 'kv_b_proj' ? /^f32$/ : /^mlx/;
        expect(a.kb[0].dtype).toMatch(want);
        expect(a.vb[0].dtype).toMatch(/^mlx/);
      }
      shard.dispose();
    }
  });
});

describe('refusals name the module, tensor and file', () => {
  const src = join(tmp.dir, 'bad-hf');
  writeRandomModel(src, { variant: 'qwen3-moe', numLayers: 2, hiddenSize: 64, moeIntermediateSize: 64, numExperts: 4, dtype: 'bf16', seed: 5 });
  const edit = (name: string, change: (q: Record<string, unknown>) => void) => {
    const dir = join(tmp.dir, name);
    writeMlxMoeModel(src, dir, { bits: 4, groupSize: 32 });
    const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    change(cfg.quantization);
    cfg.quantization_config = cfg.quantization;
    writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg));
    return dir;
  };

  it('a per-module entry whose bits disagree with the stacked tensor', () => {
    const dir = edit('bad-bits', (q) => (q['model.layers.0.mlp.switch_mlp.up_proj'] = { group_size: 32, bits: 8 }));
    expect(() => loadInProcessModel(dir)).toThrow(/config\.json: quantization\["model\.layers\.0\.mlp\.switch_mlp\.up_proj"\] says bits 8, group_size 32 but model\.layers\.0\.mlp\.switch_mlp\.up_proj\.weight in model\.safetensors is 4-bit with groups of 32/);
  });

  it('`false` for a module that has scales', () => {
    const dir = edit('bad-false', (q) => (q['model.layers.1.self_attn.q_proj'] = false));
    expect(() => loadInProcessModel(dir)).toThrow(/config\.json: quantization says model\.layers\.1\.self_attn\.q_proj is not quantized \(false\) but model\.safetensors has model\.layers\.1\.self_attn\.q_proj\.scales/);
  });

  it('a quantization mode other than affine', () => {
    const dir = edit('bad-mode', (q) => (q.mode = 'nvfp4'));
    expect(() => loadInProcessModel(dir)).toThrow(/model\.safetensors: model\.layers\.0\.self_attn\.q_proj is quantized in MLX mode "nvfp4" \(config\.json quantization\); Orchard loads modes "affine" and "mxfp4"/);
    const mx = edit('bad-mxfp4', (q) => (q.mode = 'mxfp4'));
    expect(() => loadInProcessModel(mx)).toThrow(/config\.json: quantization says mode "mxfp4" but model\.layers\.0\.self_attn\.q_proj in model\.safetensors is affine \(scales and biases\)/);
  });

  it('a stacked tensor holding another number of experts than config.json', () => {
    const dir = edit('bad-experts', () => {});
    const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...cfg, num_experts: 8 }));
    expect(() => loadInProcessModel(dir)).toThrow(/model\.safetensors: MLX-quantized model\.layers\.0\.mlp\.switch_mlp\.gate_proj\.weight: has shape \[4,64,8\], expected \[8,64, packed\]/);
  });
});
