/**
 * GGUF repos as the large models come on the hub: each quantisation a split set
 * (NAME-00001-of-0000N.gguf …) in a folder of its own, vision projectors beside them. The store picks
 * a whole set, checks every part's header before a weight byte moves, pulls the parts, and the
 * catalog serves the set from its first part.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeRandomModel } from '@orchard/engine/testing';
import { useLocalQuant } from '../../src/cli/model-session.js';
import { ModelCatalog } from '../../src/models/catalog.js';
import { ggufModels, pickGguf } from '../../src/store/gguf-pick.js';
import { HubClient, ModelRefusedError, ModelStore } from '../../src/store/index.js';
import type { HubFile } from '../../src/store/hub.js';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';

const GB = 1e9;
const file = (path: string, size: number): HubFile => ({ path, size });

describe('pickGguf: which GGUF model of a repo', () => {
  const listing = [
    file('README.md', 10),
    file('mmproj-F16.gguf', 1 * GB),
    file('Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf', 40 * GB),
    file('Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf', 40 * GB),
    file('Q4_K_M/Big-Q4_K_M-00003-of-00003.gguf', 20 * GB),
    file('Q8_0/Big-Q8_0-00001-of-00004.gguf', 45 * GB),
    file('Q8_0/Big-Q8_0-00002-of-00004.gguf', 45 * GB),
    // part 3 of the Q8_0 set is not in the listing: that set is no model
    file('Q8_0/Big-Q8_0-00004-of-00004.gguf', 45 * GB),
    file('UD-Q2_K_XL/Big-UD-Q2_K_XL-00001-of-00002.gguf', 30 * GB),
    file('UD-Q2_K_XL/Big-UD-Q2_K_XL-00002-of-00002.gguf', 10 * GB),
    file('Big-Q6_K.gguf', 20 * GB),
  ];

  it('groups split sets into one model each, whole sets only, projectors left out', () => {
    const models = ggufModels(listing);
    expect(models.map((m) => [m.path, m.quant, m.size / GB, m.files.length])).toEqual([
      ['Big-Q6_K.gguf', 'Q6_K', 20, 1],
      ['Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf', 'Q4_K_M', 100, 3],
      ['UD-Q2_K_XL/Big-UD-Q2_K_XL-00001-of-00002.gguf', 'Q2_K_XL', 40, 2],
    ]);
  });

  it('without a quantisation: the largest loadable model that fits (a K-quant mix counts as loadable)', () => {
    expect(pickGguf('o/Big-GGUF', listing, { budgetBytes: 200 * GB }).map((f) => f.path)).toEqual([
      'Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf',
      'Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf',
      'Q4_K_M/Big-Q4_K_M-00003-of-00003.gguf',
    ]);
    expect(pickGguf('o/Big-GGUF', listing, { budgetBytes: 50 * GB }).map((f) => f.path)).toEqual(['Big-Q6_K.gguf']);
    expect(() => pickGguf('o/Big-GGUF', listing, { budgetBytes: 10 * GB })).toThrow(/no GGUF model the engine loads fits in 10\.0 GB .*Q4_K_M \(100\.00 GB in 3 parts\)/);
  });

  it('a named quantisation, from the file or its folder; an unknown one names what the repo has', () => {
    expect(pickGguf('o/Big-GGUF', listing, { quant: 'ud-q2_k_xl', budgetBytes: GB }).map((f) => f.path)).toHaveLength(2);
    expect(() => pickGguf('o/Big-GGUF', listing, { quant: 'Q8_0', budgetBytes: GB })).toThrow(/no GGUF file for :Q8_0 \(the repo has Q6_K .*, Q4_K_M .*, Q2_K_XL/);
  });
});

let work: string;
let hub: FakeHub;
const repos: Record<string, string> = {};
const served = (repo: string, path: string) => hub.servedByRepo.get(`${repo}/${path}`) ?? 0;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'orchard-gguf-split-pull-'));
  const hf = writeRandomModel(join(work, 'hf'), { hiddenSize: 256, intermediateSize: 512, numLayers: 4, numHeads: 4, numKvHeads: 2, seed: 9 }).dir;
  for (const [repo, arch] of [['test/split-GGUF', 'llama'], ['test/mamba-split-GGUF', 'mamba']]) {
    const dir = join(work, repo.replace('/', '-'));
    mkdirSync(join(dir, 'Q8_0'), { recursive: true });
    const set = hfToGguf(hf, join(dir, 'Q8_0', 'tiny-Q8_0.gguf'), { dtype: 'q8_0', split: { maxTensors: 16 } });
    if (arch !== 'llama') {
      const bytes = readFileSync(set.path);
      const key = bytes.indexOf('general.architecture');
      bytes.write(arch, key + 'general.architecture'.length + 4 + 8, 'latin1');
      writeFileSync(set.path, bytes);
    }
    copyFileSync(set.parts[1].path, join(dir, 'mmproj-F16.gguf'));
    repos[repo] = dir;
  }
  hub = await startFakeHub(repos);
});
afterAll(async () => {
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('pulling a split GGUF set', () => {
  it('checks every part’s header, pulls the parts, and the catalog serves the set from its first part', async () => {
    const repo = 'test/split-GGUF';
    const data = join(work, 'data');
    const store = new ModelStore(data, new HubClient({ endpoint: hub.url }));
    try {
      const r = await store.pull(repo, { quant: 'Q8_0' });
      const parts = ['00001', '00002', '00003'].map((n) => `Q8_0/tiny-Q8_0-${n}-of-00003.gguf`);
      expect(existsSync(join(repos[repo], 'Q8_0/tiny-Q8_0-00004-of-00004.gguf'))).toBe(false);
      for (const p of parts) {
        const size = statSync(join(repos[repo], p)).size;
        expect(readFileSync(join(r.dir, p)).equals(readFileSync(join(repos[repo], p)))).toBe(true);
        // the header check's chunks are kept: every byte crosses the wire once
        expect(served(repo, p)).toBe(size);
      }
      expect(served(repo, 'mmproj-F16.gguf')).toBe(0);
      const catalog = new ModelCatalog(data, join(work, 'no-demo'));
      expect(catalog.pathOf(repo)).toBe(join(r.dir, parts[0]));
      const d = await catalog.describe(repo);
      expect(d.unsupported).toBeUndefined();
      expect(d.dims.numLayers).toBe(4);
      // `orchard run test/split-GGUF:Q8_0` again: the set here is used, named by its folder and parts
      expect(useLocalQuant(data, repo, 'Q8_0')).toBe(true);
      expect(useLocalQuant(data, repo, 'Q4_K_M')).toBe(false);
    } finally {
      await store.close();
    }
  });

  it('refuses a set the engine cannot run after fetching only the parts’ headers', async () => {
    const repo = 'test/mamba-split-GGUF';
    const store = new ModelStore(join(work, 'data-refused'), new HubClient({ endpoint: hub.url }));
    try {
      const err = await store.pull(repo, { quant: 'Q8_0' }).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ModelRefusedError);
      expect((err as Error).message).toMatch(/GGUF architecture mamba is not supported/);
      for (const n of ['00001', '00002', '00003']) {
        const p = `Q8_0/tiny-Q8_0-${n}-of-00003.gguf`;
        expect(served(repo, p)).toBeLessThanOrEqual(256 * 1024);
        expect(statSync(join(repos[repo], p)).size).toBeGreaterThan(256 * 1024);
      }
      expect(existsSync(store.dirFor(repo))).toBe(false);
    } finally {
      await store.close();
    }
  });
});
