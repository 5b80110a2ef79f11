import { describe, expect, it } from 'vitest';
import { HeaderCodec } from '../../src/runner/header.js';

describe('driver header codec', () => {
  it('round-trips begin, forward and stop through one fixed-size buffer', () => {
    const tx = new HeaderCodec(4);
    const rx = new HeaderCodec(4);
    const send = (h: Parameters<HeaderCodec['encode']>[0]) => {
      rx.buffer.set(tx.encode(h));
      return rx.decode();
    };
    expect(send({ op: 'begin', slot: 1, capacity: 300, sampling: { temperature: 0.7, topP: 0.9, topK: 40, seed: 2 ** 40 + 3 }, payloadBytes: 77 })).toEqual({
      op: 'begin',
      slot: 1,
      capacity: 300,
      sampling: { temperature: 0.7, topP: 0.9, topK: 40, seed: 2 ** 40 + 3 },
      payloadBytes: 77,
    });
    const fwd = send({ op: 'forward', slot: 0, sample: true, tokens: Float64Array.from([5, 151_935, 7]) });
    expect(fwd).toMatchObject({ op: 'forward', slot: 0, sample: true });
    expect(Array.from((fwd as { tokens: Float64Array }).tokens)).toEqual([5, 151_935, 7]);
    expect(send({ op: 'stop' })).toEqual({ op: 'stop' });
    expect(tx.buffer.length).toBe(rx.buffer.length);
  });

  it('refuses what it cannot carry and headers it cannot read', () => {
    const c = new HeaderCodec(2);
    expect(() => c.encode({ op: 'forward', slot: 0, sample: false, tokens: new Float64Array(3) })).toThrow(/1..2 tokens, got 3/);
    expect(() => c.encode({ op: 'forward', slot: 0, sample: false, tokens: new Float64Array(0) })).toThrow(/got 0/);
    c.buffer.fill(0);
    c.buffer[0] = 9;
    expect(() => c.decode()).toThrow(/unknown header op 9/);
    c.buffer[0] = 2;
    c.buffer[1] = 5;
    expect(() => c.decode()).toThrow(/forward header with 5 tokens/);
  });
});
