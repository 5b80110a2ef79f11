/**
 * Speculation under an output constraint (runner/batch-driver.ts): the constraint masks each verify row
 * in order and advances only on picked tokens, so a constrained, speculating request gives exactly the
 * constrained plain tokens — greedy and sampled — and its output still matches the schema.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { compileConstraint, loadModelConfig, loadTokenizer, pipelineStages, type ConstraintSpec } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { BatchDriver } from '../../src/runner/batch-driver.js';
import { loadRankShard } from '../../src/runner/local.js';
import { createSimGroup } from '../../src/runner/transport.js';
import { familyModelOptions } from '../../../engine/test/fixtures/chat-templates/families.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-spec-constraint-'));
  writeRandomModel(dir, familyModelOptions('qwen25', { numLayers: 2, hiddenSize: 64, intermediateSize: 128, numHeads: 4, numKvHeads: 2, seed: 17 }));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const schema: ConstraintSpec = {
  type: 'json_schema',
  schema: { type: 'array', items: { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['ok', 'n'], additionalProperties: false }, minItems: 3, maxItems: 6 },
};

it('a constrained request gives the same tokens with and without speculation, greedy and sampled', async () => {
  const tok = loadTokenizer(dir);
  const vocab = tok.vocabulary();
  const [group] = createSimGroup(1);
  const shard = loadRankShard(dir, { stages: pipelineStages(2, 1), tensor: 1 }, 0, group, { maxBatch: 16 });
  const driver = new BatchDriver(shard, { compile: (spec, stopIds) => compileConstraint(spec, vocab, { vocabSize: shard.config.vocabSize, stopIds }) });
  const eos = loadModelConfig(dir).eosTokenIds;
  // A prompt full of what the answer must look like, so prompt lookup has something to draft.
  const prompt = tok.encode('[{"ok": true, "n": 1}, {"ok": true, "n": 2}, {"ok": false, "n": 3}] [{"ok": true, "n": 1}, ');
  let drafted = 0;
  for (const sampling of [{}, { temperature: 1, seed: 4 }]) {
    const req = { promptIds: prompt, maxTokens: 80, stopTokenIds: eos, constraint: schema, ...sampling };
    const plain = await driver.generate({ ...req, speculate: 'off' }, () => true);
    const spec = await driver.generate({ ...req, speculate: 'prompt-lookup' }, () => true);
    expect(spec.tokens).toEqual(plain.tokens);
    expect(spec.finishReason).toBe(plain.finishReason);
    drafted += spec.speculation!.drafted;
    if (spec.finishReason === 'stop') {
      const items = JSON.parse(tok.decode(spec.tokens.filter((t) => !eos.includes(t)))) as { ok: boolean; n: number }[];
      expect(items.length).toBeGreaterThanOrEqual(3);
      for (const it of items) expect(typeof it.ok).toBe('boolean');
    }
    console.log(`constrained (${JSON.stringify(sampling)}): ${spec.speculation!.accepted}/${spec.speculation!.drafted} draft tokens accepted, ${spec.tokens.length} tokens, ${spec.finishReason}`);
  }
  expect(drafted).toBeGreaterThan(0);
  await driver.stop();
}, 60_000);
