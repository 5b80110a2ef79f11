import { describe, expect, it } from 'vitest';
import { plan } from '../src/plan.js';
import { calibrationRows, loadModel, PUBLISHED } from './calibration-data.js';
import { exampleCluster, readRepoJson } from './helpers.js';

/**
 * The cost model against the published 4x M3 Ultra table (shared/notes/published-measurements.md).
 * The factors in src/cost-model.ts were fitted to these points; this holds them there.
 */
describe('calibration against published 4x M3 Ultra decode speeds', () => {
  const rows = calibrationRows(readRepoJson);

  for (const r of rows.filter((x) => x.layout === 'tensor/rdma')) {
    it(`${r.model} on ${r.nodes} node(s), tensor parallel over RDMA: within ±25% of exo's ${r.published} tok/s`, () => {
      const ratio = r.predicted / r.published!;
      expect(ratio).toBeGreaterThan(0.75);
      expect(ratio).toBeLessThan(1.25);
    });
  }

  it('covers all eight published exo points', () => {
    expect(rows.filter((x) => x.layout === 'tensor/rdma')).toHaveLength(8);
  });

  for (const name of Object.keys(PUBLISHED)) {
    for (const k of [2, 4]) {
      it(`${name} on ${k} nodes over TCP only: tensor parallel predicted slower than pipeline (llama.cpp's column)`, () => {
        const tp = rows.find((x) => x.model === name && x.nodes === k && x.layout === 'tensor/tcp')!;
        const pp = rows.find((x) => x.model === name && x.nodes === k && x.layout === 'pipeline/tcp')!;
        expect(tp.predicted).toBeLessThan(pp.predicted);
      });
    }
  }

  it('the planner itself picks tensor parallel over RDMA and avoids it over TCP', () => {
    for (const p of Object.values(PUBLISHED)) {
      const m = loadModel(readRepoJson, p.fixture, p.bits);
      expect(plan(m, exampleCluster('4x-m3-ultra-tb5-rdma')).strategy).toBe('tensor');
      expect(['single', 'pipeline']).toContain(plan(m, exampleCluster('4x-m3-ultra-tb5-tcp')).strategy);
    }
  });

  it('4-node speedup over RDMA stays below the 3.2x exo claims at best', () => {
    const q = rows.filter((x) => x.model === 'qwen3' && x.layout === 'tensor/rdma');
    const speedup = q.find((x) => x.nodes === 4)!.predicted / q.find((x) => x.nodes === 1)!.predicted;
    expect(speedup).toBeGreaterThan(1.2);
    expect(speedup).toBeLessThan(3.2);
  });
});
