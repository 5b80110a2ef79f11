/**
 * Resident memory of a loaded ~120M-parameter mlx-lm MoE conversion (Qwen3-MoE shape: stacked 4-bit g64
 * `switch_mlp` experts, the router at 8 bits by the model's predicate, bf16 scales, 2 shards + index):
 * a child process (rss-child.ts) measures RSS around the load, after full GCs. The growth must stay
 * within 1.15× the file's packed bytes (plus a fixed overhead for the KV cache, scratch and code): the
 * stacked experts are read slab by slab into their packed rows, never widened, no second copy kept.
 *
 * The tensors hold random packed bits (the loader does not look at values), written directly in
 * mlx-lm's names, dtypes and shapes, so the test needs no float model and no quantizer run.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { writeSafetensors, type TensorToWrite } from '../../src/index.js';
import { f32ToBf16Bits } from '../../src/numeric/half.js';
import { writeRandomModel } from '../../src/testing/index.js';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../../../..');
const work = mkdtempSync(join(tmpdir(), 'orchard-rss-moe-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const D = 512;
const L = 4;
const H = 8;
const KV = 4;
const HD = 64;
const E = 32;
const I = 384;
const V = 4096;
const FIXED_OVERHEAD = 16 * 2 ** 20;

function randomBytes(n: number, seed: number): Uint8Array {
  const words = new Uint32Array(Math.ceil(n / 4));
  let x = seed | 1;
  for (let i = 0; i < words.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = x;
  }
  return new Uint8Array(words.buffer, 0, n);
}

/** Writes the model; returns the packed bytes of its quantized matrices. */
function writeMoe(dir: string): number {
  const info = writeRandomModel(dir, { variant: 'qwen3-moe', hiddenSize: 64, numLayers: 1, extraVocab: V - 259, dtype: 'bf16', seed: 3 });
  const tensors: TensorToWrite[] = [];
  let packed = 0;
  let seed = 1;
  const quantized = (name: string, lead: number[], rows: number, cols: number, bits: number, g: number) => {
    const base = name.slice(0, -'.weight'.length);
    const n = lead.reduce((a, b) => a * b, 1) * rows;
    const words = randomBytes((n * cols * bits) / 8, seed++);
    const groups = n * (cols / g);
    const scales = new Uint8Array(new Uint16Array(groups).fill(f32ToBf16Bits(0.01)).buffer);
    const biases = new Uint8Array(new Uint16Array(groups).fill(f32ToBf16Bits(-0.05)).buffer);
    tensors.push({ name, dtype: 'U32', shape: [...lead, rows, (cols * bits) / 32], data: words });
    tensors.push({ name: `${base}.scales`, dtype: 'BF16', shape: [...lead, rows, cols / g], data: scales });
    tensors.push({ name: `${base}.biases`, dtype: 'BF16', shape: [...lead, rows, cols / g], data: biases });
    packed += words.byteLength + scales.byteLength + biases.byteLength;
  };
  const ones = (n: number) => new Uint8Array(Uint16Array.from({ length: n }, () => f32ToBf16Bits(1)).buffer);
  quantized('model.embed_tokens.weight', [], V, D, 4, 64);
  quantized('lm_head.weight', [], V, D, 4, 64);
  tensors.push({ name: 'model.norm.weight', dtype: 'BF16', shape: [D], data: ones(D) });
  for (let l = 0; l < L; l++) {
    const p = `model.layers.${l}`;
    quantized(`${p}.self_attn.q_proj.weight`, [], H * HD, D, 4, 64);
    quantized(`${p}.self_attn.k_proj.weight`, [], KV * HD, D, 4, 64);
    quantized(`${p}.self_attn.v_proj.weight`, [], KV * HD, D, 4, 64);
    quantized(`${p}.self_attn.o_proj.weight`, [], D, H * HD, 4, 64);
    quantized(`${p}.mlp.gate.weight`, [], E, D, 8, 64);
    quantized(`${p}.mlp.switch_mlp.gate_proj.weight`, [E], I, D, 4, 64);
    quantized(`${p}.mlp.switch_mlp.up_proj.weight`, [E], I, D, 4, 64);
    quantized(`${p}.mlp.switch_mlp.down_proj.weight`, [E], D, I, 4, 64);
    for (const n of ['input_layernorm', 'post_attention_layernorm']) tensors.push({ name: `${p}.${n}.weight`, dtype: 'BF16', shape: [D], data: ones(D) });
    for (const n of ['q_norm', 'k_norm']) tensors.push({ name: `${p}.self_attn.${n}.weight`, dtype: 'BF16', shape: [HD], data: ones(HD) });
  }
  // two shards as save_model splits them, and the index
  const half = Math.floor(tensors.length / 2);
  const files = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'];
  writeSafetensors(join(dir, files[0]), tensors.slice(0, half), { format: 'mlx' });
  writeSafetensors(join(dir, files[1]), tensors.slice(half), { format: 'mlx' });
  rmSync(join(dir, 'model.safetensors'));
  const weightMap = Object.fromEntries(tensors.map((t, i) => [t.name, files[i < half ? 0 : 1]]).sort());
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: { total_size: tensors.reduce((s, t) => s + t.data.byteLength, 0) }, weight_map: weightMap }));
  const q = { group_size: 64, bits: 4, mode: 'affine', ...Object.fromEntries(Array.from({ length: L }, (_, l) => [`model.layers.${l}.mlp.gate`, { group_size: 64, bits: 8 }])) };
  const config = {
    ...info.config,
    hidden_size: D,
    num_hidden_layers: L,
    num_attention_heads: H,
    num_key_value_heads: KV,
    head_dim: HD,
    num_experts: E,
    moe_intermediate_size: I,
    mlp_only_layers: [],
    vocab_size: V,
    tie_word_embeddings: false,
    quantization: q,
    quantization_config: q,
  };
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  return packed;
}

const MiB = (b: number) => (b / 2 ** 20).toFixed(1);

describe('resident memory of a loaded mlx-lm MoE conversion (4-bit stacked experts)', () => {
  it(`RSS growth within 1.15× the packed bytes plus ${MiB(FIXED_OVERHEAD)} MiB`, async () => {
    const dir = mkdtempSync(join(work, 'm-'));
    const packed = writeMoe(dir);
    const child = join(root, 'packages/engine/test/quant/rss-child.ts');
    const { stdout } = await run(process.execPath, ['--expose-gc', '--import', 'tsx', child, dir], { cwd: root, timeout: 120_000 });
    const m = JSON.parse(stdout) as { before: number; after: number; weightBytes: number; dtypes: string[]; arena: number };
    const grew = m.after - m.before;
    console.log(`mlx MoE: packed ${MiB(packed)} MiB, loaded weights ${MiB(m.weightBytes)} MiB (${m.dtypes.join(', ')}), RSS +${MiB(grew)} MiB, WASM arena ${MiB(m.arena)} MiB`);
    expect(m.weightBytes).toBe(packed);
    expect(grew).toBeLessThanOrEqual(1.15 * packed + FIXED_OVERHEAD);
    expect(grew).toBeGreaterThanOrEqual(0.9 * packed);
  }, 180_000);
});
