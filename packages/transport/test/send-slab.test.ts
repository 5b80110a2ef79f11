import { describe, expect, it } from 'vitest';
import { SendSlab } from '../src/tcp/send-slab.js';

describe('send slab', () => {
  it('never hands out overlapping in-flight slots, and reuses memory in FIFO order', () => {
    const slab = new SendSlab(1000);
    const inFlight: Array<{ start: number; end: number }> = [];
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    let handed = 0;
    for (let step = 0; step < 20_000; step++) {
      if (rnd() < 0.55) {
        const n = 1 + Math.floor(rnd() * 300);
        const slot = slab.reserve(n);
        if (!slot) continue;
        handed++;
        expect(slot.length).toBe(n);
        const start = slot.byteOffset;
        const r = { start, end: start + n };
        for (const o of inFlight) expect(r.end <= o.start || r.start >= o.end, `overlap at step ${step}`).toBe(true);
        inFlight.push(r);
      } else if (inFlight.length) {
        inFlight.shift();
        slab.release();
      }
    }
    expect(handed).toBeGreaterThan(5000);
  });

  it('refuses what does not fit', () => {
    const slab = new SendSlab(100);
    expect(slab.reserve(101)).toBeNull();
    expect(slab.reserve(60)).not.toBeNull();
    expect(slab.reserve(60)).toBeNull();
    slab.release();
    expect(slab.reserve(100)).not.toBeNull();
  });
});
