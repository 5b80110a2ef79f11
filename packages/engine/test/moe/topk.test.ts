/**
 * torchTopK picks what PyTorch's CPU torch.topk picks, ties included: checked against torch itself
 * (Debian's python3-torch, when installed) on inputs full of ties, across both of PyTorch's paths
 * (partial_sort when 64·k ≤ n, nth_element + sort otherwise), and, everywhere, on cases whose answer
 * torch gave when this file was written.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { TopK } from '../../src/model/topk.js';
import { Prng } from '../../src/numeric/prng.js';

const python = process.env.ORCHARD_TORCH_PYTHON ?? '/usr/bin/python3';
const hasTorch = spawnSync(python, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0;

function pick(values: number[], k: number, sorted = true): number[] {
  return Array.from(new TopK(values.length).select(values, 0, values.length, k, new Int32Array(k), sorted));
}

describe('torchTopK', () => {
  it('breaks ties as torch 1.13 / 2.x on Linux does (answers recorded from torch)', () => {
    expect(pick([1, 1, 1, 1], 2)).toEqual([2, 3]);
    expect(pick([0.5, 1, 1, 0.2, 1, 1], 3)).toEqual([1, 5, 4]);
    expect(pick(new Array(128).fill(0), 8)).toEqual([84, 87, 86, 85, 82, 81, 88, 83]);
    expect(pick([0, 0, 1, 0, 0, 1, 1, 0], 2)).toEqual([2, 5]);
    expect(pick([0, 0, 1, 0, 0, 1, 1, 0], 4)).toEqual([2, 5, 6, 4]);
  });

  it('orders distinct values largest first and puts NaN on top', () => {
    expect(pick([3, 9, 1, 7, 5], 3)).toEqual([1, 3, 4]);
    expect(pick([3, NaN, 1, 7], 2)).toEqual([1, 3]);
    expect(() => pick([1, 2], 3)).toThrow(/k=3 is outside 1\.\.2/);
  });

  it.skipIf(!hasTorch)('matches torch.topk on 600 random inputs full of ties (both of its algorithms, sorted and not)', () => {
    const rng = new Prng(3);
    const cases: { values: number[]; k: number; sorted: boolean }[] = [];
    for (let c = 0; c < 600; c++) {
      const n = [4, 6, 8, 16, 17, 33, 64, 128, 130, 256, 384][c % 11];
      const levels = 1 + Math.floor(rng.next() * 6); // few distinct values: many ties
      const values = Array.from({ length: n }, () => Math.floor(rng.next() * levels) / 4);
      const k = 1 + Math.floor(rng.next() * Math.min(n, c % 3 === 0 ? 4 : 12));
      cases.push({ values, k, sorted: c % 4 !== 3 });
    }
    const script = 'import json,sys,torch\nfor c in json.load(sys.stdin):\n  print(json.dumps(torch.topk(torch.tensor(c["values"], dtype=torch.float32), c["k"], sorted=c["sorted"])[1].tolist()))';
    const out = execFileSync(python, ['-c', script], { input: JSON.stringify(cases) }).toString().trim().split('\n');
    cases.forEach((c, i) => expect(pick(c.values, c.k, c.sorted), `case ${i}: n=${c.values.length} k=${c.k}`).toEqual(JSON.parse(out[i])));
  });
});
