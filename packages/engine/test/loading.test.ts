/**
 * Proofs 4 and 5: a shard reads only its share of the weight bytes, and broken model directories
 * fail with errors naming the file and tensor (or field).
 */
import { copyFileSync, mkdirSync, readFileSync, readdirSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  Checkpoint,
  loadInProcessModel,
  loadModelConfig,
  loadShard,
  loadShardAsync,
  ModelFormatError,
  SafetensorsFile,
  UnsupportedModelError,
} from '../src/index.js';
import { writeRandomModel, writeSafetensors } from '../src/testing/index.js';
import { maxAbsDiff, tempDir } from './helpers.js';

const tmp = tempDir('loading');
afterAll(tmp.cleanup);

function copyModel(from: string, to: string): string {
  mkdirSync(to, { recursive: true });
  for (const f of readdirSync(from)) copyFileSync(join(from, f), join(to, f));
  return to;
}

function header(file: string): Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }> {
  const buf = readFileSync(file);
  return JSON.parse(buf.subarray(8, 8 + Number(buf.readBigUInt64LE(0))).toString('utf8'));
}

/** Rewrites model.safetensors with `edit` applied to its tensor list. */
function rewrite(dir: string, edit: (t: { name: string; dtype: string; shape: number[]; data: Uint8Array }[]) => void): void {
  const path = join(dir, 'model.safetensors');
  const buf = readFileSync(path);
  const hl = Number(buf.readBigUInt64LE(0));
  const h = header(path);
  const tensors = Object.entries(h)
    .filter(([k]) => k !== '__metadata__')
    .map(([name, e]) => ({ name, dtype: e.dtype, shape: e.shape, data: new Uint8Array(buf.subarray(8 + hl + e.data_offsets[0], 8 + hl + e.data_offsets[1])) }));
  edit(tensors);
  writeSafetensors(path, tensors);
}

const base = writeRandomModel(join(tmp.dir, 'base'), { variant: 'llama', numLayers: 4, hiddenSize: 64, intermediateSize: 192, seed: 2 });

const tied = writeRandomModel(join(tmp.dir, 'tied'), { variant: 'llama', numLayers: 4, hiddenSize: 64, intermediateSize: 192, tiedEmbeddings: true, seed: 2 });

/** Data bytes of one tensor in a single-file model. */
function tensorBytes(dir: string, name: string): number {
  const [a, b] = header(join(dir, 'model.safetensors'))[name].data_offsets;
  return b - a;
}

describe('bytes read by a shard', () => {
  const total = base.weightBytes;

  it('a half-model pipeline shard reads about half the weights (±10%)', () => {
    const first = loadShard(base.dir, { layers: [0, 2], tensor: { rank: 0, size: 1 }, embed: true, head: false });
    const second = loadShard(base.dir, { layers: [2, 4], tensor: { rank: 0, size: 1 }, embed: false, head: true });
    expect(first.bytesRead / total).toBeGreaterThan(0.45);
    expect(first.bytesRead / total).toBeLessThan(0.55);
    expect(second.bytesRead / total).toBeGreaterThan(0.45);
    expect(second.bytesRead / total).toBeLessThan(0.55);
    expect(first.bytesRead + second.bytesRead).toBe(total);
  });

  it('a tensor rank reads its share of the layers and head (±10%, KV replicated); rank 0 the whole embedding, the others none', () => {
    const all = { layers: [0, 4] as [number, number], embed: true, head: true };
    const noop = async () => {};
    for (const m of [base, tied]) {
      const embedding = tensorBytes(m.dir, 'model.embed_tokens.weight');
      // A tied head is the embedding's rows: each rank's share of it counts with the rest.
      const split = m.weightBytes - (m.config.tie_word_embeddings ? 0 : embedding);
      for (const [rank, size] of [[0, 2], [1, 2], [0, 4], [3, 4]]) {
        const shard = loadShard(m.dir, { ...all, tensor: { rank, size } }, { allReduce: noop });
        const rankZeroExtra = rank === 0 ? embedding - (m.config.tie_word_embeddings ? embedding / size : 0) : 0;
        const expected = split / size + rankZeroExtra;
        expect(Math.abs(shard.bytesRead / expected - 1), `${m.dir} rank ${rank} of ${size}`).toBeLessThan(0.1);
        expect(shard.weights.embed?.rows ?? 0).toBe(rank === 0 ? m.config.vocab_size : 0);
      }
    }
  });

  it('the whole model reads every tensor byte exactly once', () => {
    expect(loadInProcessModel(base.dir).bytesRead).toBe(total);
  });

  it('a sharded checkpoint opens only the files a shard needs and matches the single file', async () => {
    const sharded = writeRandomModel(join(tmp.dir, 'sharded'), { variant: 'llama', numLayers: 4, intermediateSize: 192, seed: 2, shards: 4 });
    const ckpt = Checkpoint.open(sharded.dir);
    ckpt.file('model.layers.0.mlp.up_proj.weight');
    expect(ckpt.bytesRead).toBe(0);
    ckpt.close();
    const a = await loadInProcessModel(base.dir).newSession().forward([1, 2, 3]);
    const b = await loadInProcessModel(sharded.dir).newSession().forward([1, 2, 3]);
    expect(maxAbsDiff(a, b)).toBe(0);
  });
});

describe('loadShardAsync', () => {
  it('loads the same weights as loadShard without blocking, and stops when aborted', async () => {
    const spec = { layers: [1, 3] as [number, number], tensor: { rank: 0, size: 1 }, embed: true, head: true };
    const a = loadShard(base.dir, spec);
    const b = await loadShardAsync(base.dir, spec);
    expect(b.bytesRead).toBe(a.bytesRead);
    const la = Float32Array.from(await a.forward({ tokens: [5, 6, 7] }, a.newCache(8)));
    const lb = await b.forward({ tokens: [5, 6, 7] }, b.newCache(8));
    expect(maxAbsDiff(la, lb)).toBe(0);
    const ac = new AbortController();
    ac.abort(new Error('user cancelled'));
    await expect(loadShardAsync(base.dir, spec, { signal: ac.signal })).rejects.toThrow(/user cancelled/);
  });
});

describe('bad model directories give named errors', () => {
  const expectError = (fn: () => unknown, type: typeof ModelFormatError | typeof UnsupportedModelError, ...parts: (string | RegExp)[]) => {
    let err: unknown;
    try {
      fn();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(type);
    for (const p of parts) expect((err as Error).message).toMatch(p);
  };
  const load = (dir: string) => () => loadInProcessModel(dir);

  it('truncated safetensors: names the file and the tensor cut off', () => {
    const dir = copyModel(base.dir, join(tmp.dir, 'truncated'));
    const path = join(dir, 'model.safetensors');
    truncateSync(path, readFileSync(path).length - 100);
    expectError(load(dir), ModelFormatError, 'model.safetensors', 'lm_head.weight', /truncated/);
  });

  it('file shorter than its header', () => {
    const dir = copyModel(base.dir, join(tmp.dir, 'short'));
    truncateSync(join(dir, 'model.safetensors'), 20);
    expectError(load(dir), ModelFormatError, 'model.safetensors', /truncated/);
  });

  it('corrupt header JSON', () => {
    const dir = copyModel(base.dir, join(tmp.dir, 'corrupt'));
    const path = join(dir, 'model.safetensors');
    const buf = readFileSync(path);
    buf.write('!!', 8);
    writeFileSync(path, buf);
    expectError(load(dir), ModelFormatError, 'model.safetensors', /corrupt header/);
  });

  it('absurd header length', () => {
    const dir = copyModel(base.dir, join(tmp.dir, 'hugeheader'));
    const path = join(dir, 'model.safetensors');
    const buf = readFileSync(path);
    buf.writeBigUInt64LE(1n << 40n, 0);
    writeFileSync(path, buf);
    expectError(load(dir), ModelFormatError, 'model.safetensors', /corrupt header/);
  });

  it('shape × dtype disagreeing with the byte span', () => {
    const dir = copyModel(base.dir, join(tmp.dir, 'span'));
    const path = join(dir, 'model.safetensors');
    const buf = readFileSync(path);
    const hl = Number(buf.readBigUInt64LE(0));
    const text = buf.subarray(8, 8 + hl).toString('utf8').replace('"model.norm.weight":{"dtype":"F32","shape":[64]', '"model.norm.weight":{"dtype":"F32","shape":[65]');
    expect(text.length).toBe(hl);
    buf.write(text, 8);
    writeFileSync(path, buf);
    expectError(() => SafetensorsFile.open(path), ModelFormatError, 'model.safetensors', 'model.norm.weight', /span/);
  });

  it('tensor shape not matching config.json', () => {
    const dir = copyModel(base.dir, join(tmp.dir, 'shape'));
    rewrite(dir, (ts) => {
      const t = ts.find((x) => x.name === 'model.layers.1.self_attn.k_proj.weight')!;
      t.shape = [t.shape[1], t.shape[0]];
    });
    expectError(load(dir), ModelFormatError, 'model.safetensors', 'model.layers.1.self_attn.k_proj.weight', /shape \[64,32\], expected \[32,64\]/);
  });

  it('unsupported dtype', () => {
    const dir = copyModel(base.dir, join(tmp.dir, 'dtype'));
    rewrite(dir, (ts) => {
      ts.find((x) => x.name === 'model.layers.2.mlp.gate_proj.weight')!.dtype = 'I32';
    });
    expectError(load(dir), ModelFormatError, 'model.safetensors', 'model.layers.2.mlp.gate_proj.weight', /dtype I32/);
  });

  it('missing tensor', () => {
    const dir = copyModel(base.dir, join(tmp.dir, 'missing'));
    rewrite(dir, (ts) => ts.splice(ts.findIndex((x) => x.name === 'model.layers.3.post_attention_layernorm.weight'), 1));
    expectError(load(dir), ModelFormatError, 'model.safetensors', /missing tensor model\.layers\.3\.post_attention_layernorm\.weight/);
  });

  it('sharded: index pointing at a missing file names that file', () => {
    const s = writeRandomModel(join(tmp.dir, 'sharded-missing'), { shards: 2, seed: 3 });
    const index = JSON.parse(readFileSync(join(s.dir, 'model.safetensors.index.json'), 'utf8'));
    index.weight_map['lm_head.weight'] = 'model-00009-of-00009.safetensors';
    writeFileSync(join(s.dir, 'model.safetensors.index.json'), JSON.stringify(index));
    expectError(load(s.dir), ModelFormatError, 'model-00009-of-00009.safetensors');
  });

  it('sharded: tensor absent from the index', () => {
    const s = writeRandomModel(join(tmp.dir, 'sharded-noentry'), { shards: 2, seed: 3 });
    const index = JSON.parse(readFileSync(join(s.dir, 'model.safetensors.index.json'), 'utf8'));
    delete index.weight_map['model.embed_tokens.weight'];
    writeFileSync(join(s.dir, 'model.safetensors.index.json'), JSON.stringify(index));
    expectError(load(s.dir), ModelFormatError, 'model.safetensors.index.json', 'model.embed_tokens.weight');
  });

  it('unknown architecture', () => {
    const dir = copyModel(base.dir, join(tmp.dir, 'arch'));
    const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    cfg.architectures = ['GPT2LMHeadModel'];
    writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg));
    expectError(() => loadModelConfig(dir), UnsupportedModelError, /unsupported architecture GPT2LMHeadModel/, join(dir, 'config.json'));
  });

  it('bad config field and missing config.json', () => {
    const dir = copyModel(base.dir, join(tmp.dir, 'field'));
    const cfg = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    cfg.num_hidden_layers = -1;
    writeFileSync(join(dir, 'config.json'), JSON.stringify(cfg));
    expectError(() => loadModelConfig(dir), ModelFormatError, 'config.json', 'num_hidden_layers');
    expectError(() => loadModelConfig(join(tmp.dir, 'nowhere')), ModelFormatError, 'config.json', /not found/);
  });
});
