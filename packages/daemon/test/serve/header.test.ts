import { describe, expect, it } from 'vitest';
import { HeaderCodec } from '../../src/runner/header.js';

describe('driver header codec', () => {
  it('round-trips begin, forward, end and stop through one fixed-size buffer', () => {
    const tx = new HeaderCodec(4);
    const rx = new HeaderCodec(4);
    const send = (h: Parameters<HeaderCodec['encode']>[0]) => {
      rx.buffer.set(tx.encode(h));
      return rx.decode();
    };
    expect(send({ op: 'begin', slot: 1, capacity: 300, sampling: { temperature: 0.7, topP: 0.9, topK: 40, seed: 2 ** 40 + 3 }, payloadBytes: 77, cached: 32, prefixBlocks: 4096 })).toEqual({
      op: 'begin',
      slot: 1,
      capacity: 300,
      sampling: { temperature: 0.7, topP: 0.9, topK: 40, seed: 2 ** 40 + 3 },
      payloadBytes: 77,
      cached: 32,
      prefixBlocks: 4096,
    });
    expect(send({ op: 'end', slot: 5 })).toEqual({ op: 'end', slot: 5 });
    const segments = [
      { slot: 3, n: 1, sample: true },
      { slot: 0, n: 2, sample: false },
    ];
    const fwd = send({ op: 'forward', segments, tokens: Float64Array.from([5, 151_935, 7]) });
    expect(fwd).toMatchObject({ op: 'forward', segments });
    expect(Array.from((fwd as { tokens: Float64Array }).tokens)).toEqual([5, 151_935, 7]);
    // A full step: as many one-token segments as the header carries tokens.
    const full = Array.from({ length: 4 }, (_, i) => ({ slot: i, n: 1, sample: true }));
    expect(send({ op: 'forward', segments: full, tokens: Float64Array.from([1, 2, 3, 4]) })).toMatchObject({ segments: full });
    expect(send({ op: 'stop' })).toEqual({ op: 'stop' });
    expect(tx.buffer.length).toBe(rx.buffer.length);
  });

  it('refuses what it cannot carry and headers it cannot read', () => {
    const c = new HeaderCodec(2);
    const one = (n: number) => [{ slot: 0, n, sample: false }];
    expect(() => c.encode({ op: 'forward', segments: one(3), tokens: new Float64Array(3) })).toThrow(/1..2 tokens, got 3/);
    expect(() => c.encode({ op: 'forward', segments: one(0), tokens: new Float64Array(0) })).toThrow(/got 0/);
    expect(() => c.encode({ op: 'forward', segments: one(1), tokens: new Float64Array(2) })).toThrow(/segments must split its 2 tokens/);
    c.buffer.fill(0);
    c.buffer[0] = 9;
    expect(() => c.decode()).toThrow(/unknown header op 9/);
    c.buffer[0] = 2;
    c.buffer[1] = 5;
    expect(() => c.decode()).toThrow(/forward header with 5 tokens/);
    c.buffer[1] = 2;
    c.buffer[2] = 3;
    expect(() => c.decode()).toThrow(/3 segments for 2 tokens/);
    c.buffer[2] = 1;
    c.buffer[12 + 2 + 1] = 1; // segment 0 says 1 token of the header's 2
    expect(() => c.decode()).toThrow(/segments hold 1 of its 2 tokens/);
  });
});
