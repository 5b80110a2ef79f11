/**
 * Constraints and logprobs where another stage samples: the driver sends the request's sampling payload
 * after the BEGIN header to the sampling rank, which masks, samples and sends the token back with its
 * logprobs. A pipeline and a pipeline of tensor groups give exactly what one rank gives.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileConstraint, loadModelConfig, loadTokenizer, pipelineStages, type ConstraintSpec, type InstanceLayout, type TokenLogprob } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { createSimGroup } from '../../src/runner/transport.js';
import { loadRankShard, startRank } from '../../src/runner/local.js';
import { familyModelOptions } from '../../../engine/test/fixtures/chat-templates/families.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(os.tmpdir(), 'orchard-loop-constraint-'));
  writeRandomModel(dir, familyModelOptions('qwen25', { numLayers: 4, hiddenSize: 64, intermediateSize: 128, numHeads: 4, numKvHeads: 2, seed: 17 }));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const schema: ConstraintSpec = { type: 'json_schema', schema: { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['ok', 'n'], additionalProperties: false } };

async function run(layout: InstanceLayout, req: { constraint?: ConstraintSpec; logprobs?: number }) {
  const tok = loadTokenizer(dir);
  const vocab = tok.vocabulary();
  const groups = createSimGroup(layout.stages.length * layout.tensor);
  const ranks = groups.map((g) => {
    const shard = loadRankShard(dir, layout, g.rank, g, { maxBatch: 4 });
    return startRank(g, layout, shard, { compile: (spec, stopIds) => compileConstraint(spec, vocab, { vocabSize: shard.config.vocabSize, stopIds }) });
  });
  const logprobs: (TokenLogprob | undefined)[] = [];
  const prompt = tok.encode('{"answer": ');
  const eos = loadModelConfig(dir).eosTokenIds;
  const out = await ranks[0].driver!.generate({ promptIds: prompt, maxTokens: 40, stopTokenIds: eos, temperature: 1, seed: 5, ...req }, (_id, lp) => {
    logprobs.push(lp);
    return true;
  });
  await ranks[0].driver!.stop();
  await Promise.all(ranks.map((r) => r.done));
  await Promise.all(groups.map((g) => g.close()));
  return { text: tok.decode(out.tokens.filter((t) => !eos.includes(t))), tokens: out.tokens, logprobs };
}

describe('constraints and logprobs on the sampling rank of another stage', () => {
  const single: InstanceLayout = { stages: pipelineStages(4, 1), tensor: 1 };
  for (const [name, layout] of [
    ['2-stage pipeline', { stages: pipelineStages(4, 2), tensor: 1 }],
    ['2 stages x tensor 2', { stages: pipelineStages(4, 2), tensor: 2 }],
  ] as [string, InstanceLayout][]) {
    it(`${name}: a JSON schema constrains the output exactly as on one rank`, async () => {
      const want = await run(single, { constraint: schema });
      const got = await run(layout, { constraint: schema });
      expect(got.tokens).toEqual(want.tokens);
      const v = JSON.parse(got.text);
      expect(typeof v.ok).toBe('boolean');
      expect(v.n).toBeGreaterThanOrEqual(0);
      expect(v.n).toBeLessThanOrEqual(9);
    }, 60_000);

    it(`${name}: logprobs with 3 alternatives come back from the sampling rank`, async () => {
      const want = await run(single, { logprobs: 3 });
      const got = await run(layout, { logprobs: 3 });
      expect(got.tokens).toEqual(want.tokens);
      expect(got.logprobs).toHaveLength(want.logprobs.length);
      got.logprobs.forEach((lp, i) => {
        expect(lp!.id).toBe(want.logprobs[i]!.id);
        expect(lp!.top.map((t) => t.id)).toEqual(want.logprobs[i]!.top.map((t) => t.id));
        expect(Math.abs(lp!.logprob - want.logprobs[i]!.logprob)).toBeLessThan(1e-4);
        expect(lp!.top).toHaveLength(3);
      });
    }, 60_000);
  }
});
