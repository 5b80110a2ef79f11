import { describe, expect, it } from 'vitest';
import { FrameError } from '../src/errors.js';
import { FRAME_HEADER_BYTES, FrameDecoder, KIND_DATA, encodeHeader, type FrameHeader } from '../src/wire/frame.js';

function frame(tag: number, seq: number, payload: Uint8Array, trailer = new Uint8Array(0)): Uint8Array {
  const out = new Uint8Array(FRAME_HEADER_BYTES + payload.length + trailer.length);
  encodeHeader(out, 0, KIND_DATA, tag, seq, payload.length);
  out.set(payload, FRAME_HEADER_BYTES);
  out.set(trailer, FRAME_HEADER_BYTES + payload.length);
  return out;
}

function collector(opts: { pauseFirst?: boolean } = {}) {
  const got: Array<{ tag: number; seq: number; data: number[]; trailer: number[] }> = [];
  let paused = opts.pauseFirst ?? false;
  return {
    got,
    unpause() {
      paused = false;
    },
    sink: {
      target(h: FrameHeader) {
        if (paused) return null;
        return new Uint8Array(h.length);
      },
      complete(h: FrameHeader, t: Uint8Array, tr: Uint8Array) {
        got.push({ tag: h.tag, seq: h.seq, data: [...t], trailer: [...tr] });
      },
    },
  };
}

describe('frame codec', () => {
  const stream = () => {
    const parts = [
      frame(7, 0, Uint8Array.from([1, 2, 3])),
      frame(0x80000001, 1, new Uint8Array(0)),
      frame(9, 2, Uint8Array.from({ length: 1000 }, (_, i) => i & 255)),
    ];
    const all = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
    let o = 0;
    for (const p of parts) {
      all.set(p, o);
      o += p.length;
    }
    return all;
  };

  it('decodes frames split at every possible boundary', () => {
    const all = stream();
    for (let cut = 1; cut < all.length; cut += 7) {
      const c = collector();
      const d = new FrameDecoder(c.sink);
      expect(d.push(all.subarray(0, cut))).toBe(cut);
      expect(d.push(all.subarray(cut))).toBe(all.length - cut);
      expect(c.got.map((g) => [g.tag, g.seq, g.data.length])).toEqual([
        [7, 0, 3],
        [0x80000001, 1, 0],
        [9, 2, 1000],
      ]);
      expect(c.got[2].data[999]).toBe(999 & 255);
    }
  });

  it('decodes byte by byte, with trailers', () => {
    const tr = Uint8Array.from([9, 8, 7, 6]);
    const all = new Uint8Array([...frame(1, 0, Uint8Array.from([5, 6]), tr), ...frame(2, 1, new Uint8Array(0), tr)]);
    const c = collector();
    const d = new FrameDecoder(c.sink, { trailerBytes: 4 });
    for (const b of all) d.push(Uint8Array.of(b));
    expect(c.got).toEqual([
      { tag: 1, seq: 0, data: [5, 6], trailer: [9, 8, 7, 6] },
      { tag: 2, seq: 1, data: [], trailer: [9, 8, 7, 6] },
    ]);
  });

  it('pauses when the sink has no destination and resumes later', () => {
    const all = stream();
    const c = collector({ pauseFirst: true });
    const d = new FrameDecoder(c.sink);
    const used = d.push(all);
    expect(used).toBe(FRAME_HEADER_BYTES);
    expect(d.paused).toBe(true);
    expect(d.resume()).toBe(false);
    c.unpause();
    expect(d.resume()).toBe(true);
    expect(d.push(all.subarray(used))).toBe(all.length - used);
    expect(c.got).toHaveLength(3);
  });

  it('rejects garbage, bad sequence, oversize, and unknown kinds', () => {
    const bad = (bytes: Uint8Array, max?: number) => () => new FrameDecoder(collector().sink, { maxLength: max }).push(bytes);
    expect(bad(Uint8Array.from({ length: 64 }, (_, i) => (i * 37) & 255))).toThrow(FrameError);
    expect(bad(frame(1, 5, new Uint8Array(1)))).toThrow(/sequence 5, expected 0/);
    expect(bad(frame(1, 0, new Uint8Array(100)), 10)).toThrow(/exceeds/);
    const k = frame(1, 0, new Uint8Array(1));
    k[2] = 9;
    expect(bad(k)).toThrow(/kind 9/);
    const d = new FrameDecoder(collector().sink);
    expect(() => d.push(new Uint8Array(16).fill(1))).toThrow(FrameError);
    expect(() => d.push(frame(1, 0, new Uint8Array(1)))).toThrow(/already failed/);
  });

  it('refuses lengths that do not fit the header', () => {
    expect(() => encodeHeader(new Uint8Array(16), 0, KIND_DATA, 0, 0, 2 ** 32)).toThrow(FrameError);
  });

  it('takes payload bytes written in place through the window, then mixes with copied chunks', () => {
    const payload = Uint8Array.from({ length: 5000 }, (_, i) => (i * 11) & 255);
    const all = frame(3, 0, payload);
    const dest = new Uint8Array(5000);
    const done: number[] = [];
    const d = new FrameDecoder({ target: () => dest, complete: (h) => done.push(h.tag) });
    expect(d.payloadWindow(1)).toBeNull(); // no header yet
    d.push(all.subarray(0, FRAME_HEADER_BYTES + 100)); // header + 100 payload bytes copied
    const w = d.payloadWindow(1000)!;
    expect(w.length).toBe(4900);
    expect(d.isWindow(w)).toBe(true);
    expect(d.isWindow(dest)).toBe(false);
    w.set(all.subarray(FRAME_HEADER_BYTES + 100, FRAME_HEADER_BYTES + 3000)); // "the socket read 2900 bytes"
    d.advanceInPlace(2900);
    expect(d.payloadWindow(2101)).toBeNull(); // only 2000 left
    d.push(all.subarray(FRAME_HEADER_BYTES + 3000));
    expect(done).toEqual([3]);
    expect(Buffer.from(dest).equals(Buffer.from(payload))).toBe(true);
    expect(() => d.advanceInPlace(1)).toThrow(FrameError);
  });
});
