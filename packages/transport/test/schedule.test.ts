import { describe, expect, it } from 'vitest';
import { collectiveTag } from '../src/collectives/exchange.js';
import { floatToHalf, halfToFloat } from '../src/collectives/reduce.js';
import { chooseAllReduce, chunks, ringSteps, segments } from '../src/collectives/schedule.js';

describe('schedules', () => {
  it('segments cover the range exactly, sizes differing by at most one', () => {
    for (const [count, parts] of [[0, 3], [1, 4], [10, 3], [1_000_003, 4], [7, 7]]) {
      const s = segments(count, parts);
      expect(s).toHaveLength(parts);
      expect(s[0][0]).toBe(0);
      expect(s[parts - 1][1]).toBe(count);
      for (let j = 1; j < parts; j++) expect(s[j][0]).toBe(s[j - 1][1]);
      const sizes = s.map(([a, b]) => b - a);
      expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
    }
  });

  it('chunks split a range into pieces of at most the chunk size', () => {
    expect(chunks([5, 17], 5)).toEqual([[5, 10], [10, 15], [15, 17]]);
    expect(chunks([3, 3], 5)).toEqual([[3, 3]]);
  });

  it('the ring leaves every rank with every segment reduced over all ranks exactly once', () => {
    for (let size = 2; size <= 8; size++) {
      // Symbolic simulation: each rank holds, per segment, the multiset of contributions.
      const held = Array.from({ length: size }, (_, r) => Array.from({ length: size }, () => [r]));
      const steps = Array.from({ length: size }, (_, r) => ringSteps(r, size));
      for (let s = 0; s < 2 * (size - 1); s++) {
        const sent = steps.map((st, r) => ({ seg: st[s].send, data: [...held[r][st[s].send]] }));
        for (let r = 0; r < size; r++) {
          const st = steps[r][s];
          const from = sent[(r - 1 + size) % size];
          expect(from.seg, `size ${size} step ${s} rank ${r}`).toBe(st.recv);
          held[r][st.recv] = st.reduce ? [...from.data, ...held[r][st.recv]] : from.data;
          // Pipelining relies on this: what is sent next was received in this step.
          if (s + 1 < 2 * (size - 1)) expect(steps[r][s + 1].send).toBe(st.recv);
        }
      }
      for (let r = 0; r < size; r++) {
        for (let j = 0; j < size; j++) expect([...held[r][j]].sort()).toEqual(Array.from({ length: size }, (_, i) => i));
      }
    }
  });

  it('chooses direct for two ranks or while one rank sends at most the threshold, ring otherwise', () => {
    expect(chooseAllReduce(64 << 20, 2, 65536)).toBe('direct');
    expect(chooseAllReduce(32768, 3, 65536)).toBe('direct');
    expect(chooseAllReduce(32772, 3, 65536)).toBe('ring');
    expect(chooseAllReduce(16384, 4, 65536)).toBe('direct');
    expect(chooseAllReduce(32768, 4, 65536)).toBe('ring');
  });

  it('collective tags are distinct per operation and step, and never the user tag', () => {
    const seen = new Set<number>();
    for (let op = 0; op < 300; op++) for (let s = 0; s < 8; s++) seen.add(collectiveTag(op, s));
    expect(seen.size).toBe(2400);
    expect(seen.has(0)).toBe(false);
    expect(() => collectiveTag(0, 256)).toThrow(RangeError);
  });
});

describe('f16 conversion', () => {
  it('round-trips every finite half exactly', () => {
    const bad: number[] = [];
    for (let h = 0; h < 65536; h++) {
      if (((h >> 10) & 0x1f) === 31) continue;
      if (floatToHalf(halfToFloat(h)) !== h) bad.push(h);
    }
    expect(bad).toEqual([]);
  });

  it('bulk conversions agree with the scalar ones: every half, and f32 values across all ranges', async () => {
    const { fromHalfBulk, toHalfBulk } = await import('../src/collectives/reduce.js');
    const halves = Uint16Array.from({ length: 65536 }, (_, i) => i);
    const f = new Float32Array(65536);
    fromHalfBulk(f, new Int32Array(f.buffer), halves, 0, 65536);
    const badFrom: number[] = [];
    for (let h = 0; h < 65536; h++) if (!Object.is(f[h], halfToFloat(h)) && !(Number.isNaN(f[h]) && Number.isNaN(halfToFloat(h)))) badFrom.push(h);
    expect(badFrom).toEqual([]);
    // f32 inputs: random bit patterns plus edges around every half boundary and rounding tie.
    const xs = new Float32Array(200_000);
    const bits = new Uint32Array(xs.buffer);
    let seed = 11;
    for (let i = 0; i < 100_000; i++) bits[i] = seed = (seed * 1664525 + 1013904223) >>> 0;
    for (let i = 0; i < 100_000; i++) {
      const h = i % 65536;
      xs[100_000 + i] = halfToFloat(h) * (1 + ((i % 3) - 1) * 2 ** -11); // on, just below, just above
    }
    xs[0] = 65520;
    xs[1] = -65504;
    xs[2] = 2 ** -24;
    xs[3] = 2 ** -14;
    xs[4] = 0;
    xs[5] = -0;
    const out = new Uint16Array(xs.length);
    toHalfBulk(out, 0, xs, new Int32Array(xs.buffer), xs.length);
    const badTo: number[] = [];
    for (let i = 0; i < xs.length; i++) if (out[i] !== floatToHalf(xs[i])) badTo.push(i);
    expect(badTo.slice(0, 5)).toEqual([]);
  });

  it('rounds to nearest even, overflows to infinity, keeps NaN', () => {
    expect(floatToHalf(1 + 2 ** -11)).toBe(0x3c00); // tie -> even (1.0)
    expect(floatToHalf(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie -> even (upper)
    expect(floatToHalf(65520)).toBe(0x7c00);
    expect(floatToHalf(2 ** -25)).toBe(0); // tie at the smallest subnormal -> 0 (even)
    expect(floatToHalf(3 * 2 ** -26)).toBe(1);
    expect(Number.isNaN(halfToFloat(floatToHalf(NaN)))).toBe(true);
  });
});

describe('f32 SIMD sum', () => {
  it('is available here and bit-identical to the scalar loop, at any length and offset, aliased or not', async () => {
    const { addF32, simdAvailable } = await import('../src/collectives/simd.js');
    expect(simdAvailable()).toBe(true);
    let seed = 3;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5) * 10 ** Math.floor(((seed >>> 8) % 12) - 6);
    for (const n of [0, 1, 3, 255, 256, 257, 16383, 16384, 16385, 40_001]) {
      const a = Float32Array.from({ length: n + 7 }, rnd);
      const b = Float32Array.from({ length: n + 5 }, rnd);
      a[3] = NaN;
      b[4] = Infinity;
      const simd = new Float32Array(n + 2);
      const scalar = new Float32Array(n + 2);
      addF32(simd, 2, a, 7 - 4, b, 5 - 3, n);
      addF32(scalar, 2, a, 7 - 4, b, 5 - 3, n, true);
      expect(Buffer.from(simd.buffer).equals(Buffer.from(scalar.buffer)), `n=${n}`).toBe(true);
      // In place: a := a + b.
      const inPlace = a.slice();
      addF32(inPlace, 0, inPlace, 0, b, 0, n);
      for (let i = 0; i < n; i++) if (!Object.is(inPlace[i], Math.fround(a[i] + b[i]))) throw new Error(`in place, n=${n}, i=${i}`);
    }
  });

  it('adds from staging inside the kernel memory bit-identically, at unaligned offsets, across growth', async () => {
    const { SimdStage } = await import('../src/collectives/simd-stage.js');
    const stage = new SimdStage();
    let seed = 11;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32 - 0.5) * 10 ** Math.floor(((seed >>> 8) % 12) - 6);
    // Growing sizes: each call may grow the memory and detach the previous view.
    for (const n of [1, 3, 255, 256, 16383, 16385, 40_001, 3_000_001]) {
      const s = stage.stage(n + 9)!;
      expect(s.length).toBe(n + 9);
      for (let i = 0; i < s.length; i++) s[i] = rnd();
      s[7] = NaN;
      const out = Float32Array.from({ length: n + 4 }, rnd);
      out[5] = -Infinity;
      const want = out.slice();
      for (let i = 0; i < n; i++) want[3 + i] = Math.fround(out[3 + i] + s[6 + i]);
      stage.addInto(out, 3, 6, n);
      expect(Buffer.from(out.buffer).equals(Buffer.from(want.buffer)), `n=${n}`).toBe(true);
    }
    // Past what wasm32 can address: no stage (the ring then stages in ordinary memory).
    expect(stage.stage(2 ** 30)).toBeNull();
    stage.release();
  });
});
