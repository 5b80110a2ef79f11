/**
 * The capability check and model description (format/describe.ts): what it says a model loads is what
 * the loader then reads, tensor by tensor; it says the same from headers alone; and it refuses with the
 * loader's reason (architecture, quantization method, tokenizer) before any weight byte is read.
 */
import { copyFileSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { hfToGguf } from '../../src/gguf/index.js';
import { GgufCheckpoint } from '../../src/gguf/read-model.js';
import { describeModelFiles, loadShard, SafetensorsFile, type ModelFileDescription } from '../../src/index.js';
import { writeAwqModel, writeMlxModel, writeRandomModel, type RandomModelOptions } from '../../src/testing/index.js';
import { tempDir } from '../helpers.js';

const tmp = tempDir('describe');
afterAll(tmp.cleanup);
afterEach(() => vi.restoreAllMocks());

/** Bytes the loader reads per tensor name while loading the whole model as one shard. */
function loadedBytesPerTensor(path: string, numLayers: number): Map<string, number> {
  const seen = new Map<string, number>();
  for (const cls of [SafetensorsFile, GgufCheckpoint] as const) {
    const original = cls.prototype.readBlock;
    vi.spyOn(cls.prototype, 'readBlock').mockImplementation(function (this: SafetensorsFile | GgufCheckpoint, tensor, ...rest) {
      const before = this.bytesRead;
      (original as (...a: unknown[]) => void).call(this, tensor, ...rest);
      seen.set(tensor, (seen.get(tensor) ?? 0) + this.bytesRead - before);
    });
  }
  const shard = loadShard(path, { layers: [0, numLayers], tensor: { rank: 0, size: 1 }, embed: true, head: true });
  expect([...seen.values()].reduce((a, b) => a + b, 0)).toBe(shard.bytesRead);
  return seen;
}

function loadable(d: ReturnType<typeof describeModelFiles>): ModelFileDescription {
  if (!d.loadable) throw new Error(`refused at ${d.stage}: ${d.reason}`);
  return d;
}

const MODELS: Record<string, RandomModelOptions & { mlx?: boolean; gguf?: boolean }> = {
  'llama, two shards, tied embeddings': { variant: 'llama', shards: 2, tiedEmbeddings: true },
  'qwen3-moe': { variant: 'qwen3-moe' },
  'deepseek-v3 (MLA, shared experts)': { variant: 'deepseek-v3' },
  'gpt-oss (merged experts)': { variant: 'gpt-oss' },
  'qwen3 as MLX 4-bit': { variant: 'qwen3', mlx: true },
  'mixtral as GGUF (stacked experts)': { variant: 'mixtral', gguf: true },
  'deepseek-v3 as GGUF': { variant: 'deepseek-v3', gguf: true },
};

describe.each(Object.entries(MODELS))('%s', (name, { mlx, gguf, ...options }) => {
  const src = join(tmp.dir, name.replace(/[^a-z0-9]+/gi, '-'));
  const info = writeRandomModel(src, { seed: 5, numLayers: 3, ...options });
  let path = src;
  if (mlx) writeMlxModel(src, (path = `${src}-mlx`), { bits: 4, groupSize: 32 });
  if (gguf) hfToGguf(src, (path = join(src, 'model.gguf')), { dtype: 'f32' });

  it('describes exactly the bytes the loader then reads, tensor by tensor', () => {
    const d = loadable(describeModelFiles(path));
    expect(d.format).toBe(gguf ? 'gguf' : 'safetensors');
    expect(d.config.numLayers).toBe(3);
    const loaded = loadedBytesPerTensor(path, 3);
    expect(Object.fromEntries(d.tensors.map((t) => [t.name, t.bytes]))).toEqual(Object.fromEntries(loaded));
    expect(d.weightBytes).toBe([...loaded.values()].reduce((a, b) => a + b, 0));
    if (options.variant === 'qwen3-moe' || options.variant === 'mixtral') {
      // every routed expert is there on its own (a GGUF's stacked tensor as one slab per expert)
      expect(d.tensors.filter((t) => /\.experts\.\d+\.(gate_proj|w1)\.weight$/.test(t.name))).toHaveLength(d.config.moe!.experts * d.config.moe!.sparse.filter(Boolean).length);
    }
    if (!mlx && !gguf && !options.shards) expect(d.weightBytes).toBeLessThanOrEqual(info.weightBytes);
  });

  if (!gguf) {
    it('says the same from the headers alone (no weight file present)', () => {
      const full = loadable(describeModelFiles(path));
      const bare = `${path}-headers`;
      mkdirSync(bare, { recursive: true });
      const headers = new Map<string, { header: Uint8Array; size: number }>();
      for (const f of readdirSync(path)) {
        const bytes = readFileSync(join(path, f));
        if (!f.endsWith('.safetensors')) {
          copyFileSync(join(path, f), join(bare, f));
          continue;
        }
        const n = Number(bytes.readBigUInt64LE(0));
        headers.set(f, { header: new Uint8Array(bytes.subarray(8, 8 + n)), size: bytes.byteLength });
      }
      const d = loadable(describeModelFiles(bare, { openFile: (f) => SafetensorsFile.fromHeader(join(bare, f), headers.get(f)!.header, headers.get(f)!.size) }));
      expect(d.tensors).toEqual(full.tensors);
      expect(d.config).toEqual({ ...full.config, dir: bare });
    });
  }
});

describe('refusals name the reason', () => {
  const base = join(tmp.dir, 'base');
  writeRandomModel(base, { variant: 'llama', seed: 3, numLayers: 2 });

  it('an architecture the engine does not run', () => {
    const dir = join(tmp.dir, 'unknown-arch');
    writeRandomModel(dir, { variant: 'llama', seed: 3, numLayers: 2 });
    const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, architectures: ['MambaForCausalLM'], model_type: 'mamba' }));
    const d = describeModelFiles(dir);
    expect(d).toMatchObject({ loadable: false, stage: 'config' });
    expect(!d.loadable && d.reason).toMatch(/unsupported architecture MambaForCausalLM/);
  });

  it('AWQ weights, by their quantization method', () => {
    const dir = join(tmp.dir, 'awq');
    writeAwqModel(base, dir);
    const d = describeModelFiles(dir);
    // config.json's quantization_config already names a method the engine does not load: refused there.
    expect(d).toMatchObject({ loadable: false, stage: 'config' });
    expect(!d.loadable && d.reason).toMatch(/quantization_config\.quant_method "awq" is not supported/);
  });

  it('a weight of a dtype the loader does not take', () => {
    const dir = join(tmp.dir, 'i8');
    writeRandomModel(dir, { variant: 'llama', seed: 3, numLayers: 2 });
    const st = readFileSync(join(dir, 'model.safetensors'));
    const n = Number(st.readBigUInt64LE(0));
    const header = JSON.parse(st.subarray(8, 8 + n).toString('utf8'));
    const t = header['model.layers.1.mlp.down_proj.weight'];
    // same bytes, read as I32: the header stays consistent, the dtype is what is wrong
    header['model.layers.1.mlp.down_proj.weight'] = { ...t, dtype: 'I32' };
    let json = JSON.stringify(header);
    json += ' '.repeat(n - Buffer.byteLength(json));
    writeFileSync(join(dir, 'model.safetensors'), Buffer.concat([st.subarray(0, 8), Buffer.from(json), st.subarray(8 + n)]));
    const d = describeModelFiles(dir);
    expect(d).toMatchObject({ loadable: false, stage: 'weights' });
    expect(!d.loadable && d.reason).toMatch(/model\.layers\.1\.mlp\.down_proj\.weight has dtype I32/);
  });

  it('a missing tokenizer, unless the caller skips that stage', () => {
    const dir = join(tmp.dir, 'no-tokenizer');
    writeRandomModel(dir, { variant: 'llama', seed: 3, numLayers: 2 });
    rmSync(join(dir, 'tokenizer.json'));
    const d = describeModelFiles(dir);
    expect(d).toMatchObject({ loadable: false, stage: 'tokenizer' });
    expect(!d.loadable && d.reason).toMatch(/no tokenizer \(looked for tokenizer\.json, tiktoken\.model, tokenizer\.model\)/);
    expect(describeModelFiles(dir, { tokenizer: false })).toMatchObject({ loadable: true, tokenizerChecked: false });
  });
});
