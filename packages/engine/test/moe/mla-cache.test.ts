/**
 * Latent attention caches the compressed latent: kv_lora_rank + qk_rope_head_dim f32 values per token
 * per layer, on every tensor rank (each head attends over the whole latent), never expanded K/V — for
 * this model 40 values instead of 2·heads·(nope + v) = 256.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { kvCacheValuesPerToken, loadInProcessModel, loadShard } from '../../src/index.js';
import { writeRandomModel } from '../../src/testing/index.js';
import { tempDir } from '../helpers.js';

const tmp = tempDir('mla-cache');
afterAll(tmp.cleanup);

describe('latent KV cache', () => {
  const m = writeRandomModel(join(tmp.dir, 'ds'), { variant: 'deepseek-v3', numLayers: 3, numHeads: 4 });
  const latent = (m.config.kv_lora_rank as number) + (m.config.qk_rope_head_dim as number);

  it('holds kv_lora_rank + rope values per token per layer, on every tensor rank', () => {
    expect(latent).toBe(40);
    for (const size of [1, 2, 4]) {
      for (let rank = 0; rank < size; rank++) {
        const shard = loadShard(m.dir, { layers: [0, 3], tensor: { rank, size }, embed: true, head: true }, { allReduce: async () => {} });
        expect(kvCacheValuesPerToken(shard.config, shard.slice)).toBe(latent);
        const cache = shard.newCache(32);
        expect(cache.k.map((b) => b.length)).toEqual([32 * latent, 32 * latent, 32 * latent]);
        expect(cache.v.map((b) => b.length)).toEqual([0, 0, 0]);
      }
    }
  });

  it('decoding from the cache equals recomputing the whole sequence', async () => {
    const model = loadInProcessModel(m.dir, { maxBatch: 32 });
    const seq = [5, 9, 200, 3, 77, 18, 42, 101, 8];
    const incremental = model.newSession(32);
    await incremental.forward(seq.slice(0, 4));
    let last = new Float32Array(0);
    for (const t of seq.slice(4)) last = Float32Array.from(await incremental.forward([t]));
    const whole = await model.newSession(32).forward(seq);
    let d = 0;
    for (let i = 0; i < whole.length; i++) d = Math.max(d, Math.abs(whole[i] - last[i]));
    expect(d).toBeLessThan(1e-5);
    expect(Math.max(...whole.map(Math.abs))).toBeGreaterThan(0.1);
  });
});
