/**
 * Embeddings: pooling read from sentence-transformers files, and pooled vectors that agree with the
 * generation path — a causal model's hidden state at position k depends only on tokens 0..k, so the
 * last-token embedding of a prefix times the LM head is that prefix's next-token logits, and the mean
 * embedding of a text is the mean of its prefixes' last-token embeddings.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createReferenceBackend, embedTokens, loadShard, loadTokenizer, readEmbeddingConfig, type EmbeddingConfig } from '../src/index.js';
import { writeRandomModel } from '../src/testing/index.js';
import { tempDir } from './helpers.js';

const tmp = tempDir('embed');
afterAll(tmp.cleanup);
const info = writeRandomModel(join(tmp.dir, 'm'), { variant: 'qwen3', numLayers: 2, seed: 4 });
const whole = { layers: [0, info.config.num_hidden_layers as number] as [number, number], tensor: { rank: 0, size: 1 }, embed: true, head: true };
// A batch of 4 makes the text go through in many chunks; the other shard takes it in one.
const chunked = loadShard(info.dir, whole, { backend: createReferenceBackend(), maxBatch: 4 });
const oneGo = loadShard(info.dir, whole, { backend: createReferenceBackend(), maxBatch: 128 });
const ids = loadTokenizer(info.dir).encode('Apples and pears grow in the orchard');
const raw = (pooling: EmbeddingConfig['pooling']): EmbeddingConfig => ({ pooling, normalize: false, source: 'test' });

function close(a: Float32Array, b: Float32Array, tol: number): void {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  expect(worst).toBeLessThan(tol);
}

describe('readEmbeddingConfig', () => {
  it('without sentence-transformers files: mean pooling, normalised', () => {
    expect(readEmbeddingConfig(info.dir)).toMatchObject({ pooling: 'mean', normalize: true, source: 'default' });
  });

  it("Qwen3-Embedding's layout: last-token pooling and a Normalize module", () => {
    const dir = join(tmp.dir, 'st');
    mkdirSync(join(dir, '1_Pooling'), { recursive: true });
    writeFileSync(join(dir, 'modules.json'), JSON.stringify([
      { idx: 0, name: '0', path: '', type: 'sentence_transformers.models.Transformer' },
      { idx: 1, name: '1', path: '1_Pooling', type: 'sentence_transformers.models.Pooling' },
      { idx: 2, name: '2', path: '2_Normalize', type: 'sentence_transformers.models.Normalize' },
    ]));
    writeFileSync(join(dir, '1_Pooling', 'config.json'), JSON.stringify({ word_embedding_dimension: 64, pooling_mode_cls_token: false, pooling_mode_mean_tokens: false, pooling_mode_lasttoken: true }));
    expect(readEmbeddingConfig(dir)).toMatchObject({ pooling: 'last', normalize: true });
    writeFileSync(join(dir, '1_Pooling', 'config.json'), JSON.stringify({ pooling_mode_mean_tokens: true, pooling_mode_max_tokens: true }));
    expect(() => readEmbeddingConfig(dir)).toThrow(/1_Pooling\/config\.json: needs exactly one of .*found pooling_mode_mean_tokens, pooling_mode_max_tokens/);
  });
});

describe('embedTokens', () => {
  it("last-token pooling × the LM head = the generation path's next-token logits, in chunks or in one go", async () => {
    const pooled = await embedTokens(chunked, ids, raw('last'));
    const logits = new Float32Array(chunked.config.vocabSize);
    chunked.backend.matvec(logits, chunked.weights.head!, pooled);
    const cache = oneGo.newCache(ids.length);
    close(logits, (await oneGo.forward({ tokens: ids }, cache)).slice(), 1e-4);
    close(await embedTokens(oneGo, ids, raw('last')), pooled, 1e-5);
  });

  it('mean pooling = the mean of every prefix’s last-token embedding; cls = the first token’s', async () => {
    const mean = await embedTokens(chunked, ids, raw('mean'));
    const want = new Float32Array(mean.length);
    for (let k = 1; k <= ids.length; k++) {
      const v = await embedTokens(oneGo, ids.slice(0, k), raw('last'));
      for (let i = 0; i < v.length; i++) want[i] += v[i] / ids.length;
    }
    close(mean, want, 1e-4);
    close(await embedTokens(chunked, ids, raw('cls')), await embedTokens(oneGo, ids.slice(0, 1), raw('last')), 1e-5);
  });

  it('normalised: unit length, same direction; other text, other vector', async () => {
    const plain = await embedTokens(chunked, ids, raw('mean'));
    const unit = await embedTokens(chunked, ids, { ...raw('mean'), normalize: true });
    const norm = Math.hypot(...plain);
    expect(Math.hypot(...unit)).toBeCloseTo(1, 5);
    close(unit, plain.map((x) => x / norm), 1e-6);
    const other = await embedTokens(chunked, ids.slice(1), { ...raw('mean'), normalize: true });
    expect(unit.reduce((s, x, i) => s + x * other[i], 0)).toBeLessThan(0.9999);
    await expect(embedTokens(chunked, [], raw('mean'))).rejects.toThrow(/no tokens/);
    await expect(embedTokens(chunked, [...ids.slice(0, 8), chunked.config.vocabSize], raw('mean'))).rejects.toThrow(`token id ${chunked.config.vocabSize} is outside the vocabulary`);
  });
});
