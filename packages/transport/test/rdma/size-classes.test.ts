import { describe, expect, it } from 'vitest';
import { chunkLength, DEFAULT_SIZE_CLASSES, planChunks, recvLength, validateSizeClasses } from '../../src/rdma/size-classes.js';
import { framesOf } from '../../src/rdma/verbs.js';

describe('size classes', () => {
  it('cover every byte once, stay within the class, and give SEND and RECV the same frame count', () => {
    let x = 12345;
    const sizes = [1, 4095, 4096, 4097, 524_288, 524_289, 16_773_120];
    for (let k = 0; k < 300; k++) {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      sizes.push(1 + (x % 3_000_000));
    }
    for (const classes of [DEFAULT_SIZE_CLASSES, [4096], [4096, 131_072]]) {
      for (const n of sizes) {
        const plan = planChunks(n, classes);
        let total = 0;
        for (let i = 0; i < plan.count; i++) {
          const len = chunkLength(plan, i);
          expect(len).toBeGreaterThan(0);
          expect(len).toBeLessThanOrEqual(plan.chunkBytes);
          expect(framesOf(recvLength(len))).toBe(framesOf(len));
          total += len;
        }
        expect(total).toBe(n);
        expect(classes).toContain(plan.chunkBytes);
      }
    }
  });

  it('a message uses the smallest class that holds it; an empty one sends nothing', () => {
    expect(planChunks(100).chunkBytes).toBe(4096);
    expect(planChunks(5000).chunkBytes).toBe(16_384);
    expect(planChunks(10_000_000)).toMatchObject({ chunkBytes: 524_288, count: 20 });
    expect(planChunks(0).count).toBe(0);
  });

  it('rejects classes that are not whole frames or not increasing', () => {
    expect(() => validateSizeClasses([])).toThrow(/at least one/);
    expect(() => validateSizeClasses([4096, 6000])).toThrow(/6000 is not a positive multiple of 4096/);
    expect(() => validateSizeClasses([8192, 4096])).toThrow(/strictly increasing/);
  });
});
