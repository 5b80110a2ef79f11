/**
 * The memory a node keeps per instance outside the planner's plan (serving/reserved-memory.ts): the draft
 * model's weights and K/V at its context for every sequence, plus the prefix cache; said in the profile.
 */
import { dirname, join, resolve } from 'node:path';
import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { ModelDescription } from '../../src/models/description.js';
import { reservedBytes } from '../../src/serving/reserved-memory.js';

const DEMO = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../models/orchard-demo');

/** A description with only the fields the reservation reads. */
const fake = (o: { totalBytes: number; kv: number; layers: number; maxContext: number }) => async () =>
  ({ spec: { totalBytes: o.totalBytes, kvBytesPerTokenPerLayer: o.kv, numLayers: o.layers }, maxContext: o.maxContext }) as unknown as ModelDescription;

describe('memory kept outside the plan per instance', () => {
  it('the prefix cache alone without a draft model', async () => {
    expect(await reservedBytes({ draftModel: null, prefixCacheBytes: 64 * 2 ** 20, context: 4096, batch: 8 })).toBe(64 * 2 ** 20);
    expect(await reservedBytes({ draftModel: null, prefixCacheBytes: 0, context: null, batch: 1 })).toBe(0);
  });

  it("a draft model: weights plus K/V for every sequence at the instance's context, capped at the draft's own", async () => {
    const d = fake({ totalBytes: 1e9, kv: 1024, layers: 16, maxContext: 2048 });
    expect(await reservedBytes({ draftModel: '/m', prefixCacheBytes: 5, context: 1000, batch: 4 }, d)).toBe(1e9 + 1024 * 16 * 1000 * 4 + 5);
    // an instance context past the draft's: the draft stops at its own (runner/draft-model.ts)
    expect(await reservedBytes({ draftModel: '/m', prefixCacheBytes: 0, context: 100_000, batch: 1 }, d)).toBe(1e9 + 1024 * 16 * 2048);
    expect(await reservedBytes({ draftModel: '/m', prefixCacheBytes: 0, context: null, batch: 2 }, d)).toBe(1e9 + 1024 * 16 * 2048 * 2);
  });

  it('sizes a real model directory from its files', async () => {
    const weights = statSync(join(DEMO, 'model.safetensors')).size;
    const got = await reservedBytes({ draftModel: DEMO, prefixCacheBytes: 0, context: 32, batch: 1 });
    expect(got).toBeGreaterThan(weights * 0.9);
    expect(await reservedBytes({ draftModel: DEMO, prefixCacheBytes: 0, context: 64, batch: 1 })).toBeGreaterThan(got);
  });

  it('a draft model that cannot be sized is an error naming it', async () => {
    const broken = async () => {
      throw new Error('no config.json');
    };
    await expect(reservedBytes({ draftModel: '/nowhere/draft', prefixCacheBytes: 0, context: 128, batch: 1 }, broken)).rejects.toThrow('--draft-model /nowhere/draft: cannot size it for the memory plan: no config.json');
  });
});
