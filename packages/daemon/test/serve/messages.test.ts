import { describe, expect, it } from 'vitest';
import { decodeServe, encodeServe, MAX_SERVE_BYTES } from '../../src/serving/messages.js';

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

describe('serve messages', () => {
  it('round-trips a valid endpoint message', () => {
    const m = { type: 'endpoint' as const, from: 'peerA', instance: 'm-1', rank: 1, addresses: [{ host: '10.0.0.2', port: 4000 }] };
    expect(decodeServe(encodeServe(m), 'peerA')).toEqual({ ok: true, message: m });
  });
  it('drops spoofed senders, bad shapes, non-JSON and oversized messages with a reason', () => {
    const m = { type: 'status', from: 'peerA', instance: 'x', ready: true, active: 0, queued: 0, capacity: 4 };
    expect(decodeServe(enc(m), 'peerB')).toMatchObject({ ok: false, reason: expect.stringContaining('claims to be from peerA') });
    expect(decodeServe(enc({ ...m, active: -1 }), 'peerA').ok).toBe(false);
    expect(decodeServe(enc({ type: 'endpoint', from: 'peerA', instance: 'x', rank: 0, addresses: [] }), 'peerA').ok).toBe(false);
    expect(decodeServe(new TextEncoder().encode('{nope'), 'peerA')).toMatchObject({ ok: false, reason: 'serve message is not JSON' });
    expect(decodeServe(new Uint8Array(MAX_SERVE_BYTES + 1), 'peerA').ok).toBe(false);
    expect(decodeServe(enc({ type: 'whatever', from: 'peerA' }), 'peerA').ok).toBe(false);
  });
});
