import { describe, expect, it } from 'vitest';
import { FrameError } from '../src/errors.js';
import { FrameOpener, FrameSealer } from '../src/wire/aead.js';
import {
  clientProof,
  deriveSessionKeys,
  encodeHello,
  newNonce,
  parseHello,
  proofMatches,
  serverProof,
  Purpose,
} from '../src/wire/handshake.js';

describe('handshake proofs', () => {
  const hello = encodeHello({ flags: 0, purpose: Purpose.Data, clientRank: 2, serverRank: 1, clientNonce: newNonce(), groupId: 'grp' });
  const nonce = newNonce();
  const secret = Buffer.from('s3cret');

  it('round-trips the hello', () => {
    const h = parseHello(hello);
    expect([h.clientRank, h.serverRank, h.groupId, h.purpose]).toEqual([2, 1, 'grp', Purpose.Data]);
  });

  it('binds the secret, the role, the nonces and the hello', () => {
    const p = clientProof(secret, hello, nonce);
    expect(proofMatches(p, clientProof(secret, hello, nonce))).toBe(true);
    expect(proofMatches(p, clientProof(Buffer.from('other'), hello, nonce))).toBe(false);
    expect(proofMatches(p, serverProof(secret, hello, nonce))).toBe(false);
    expect(proofMatches(p, clientProof(secret, hello, newNonce()))).toBe(false);
    const other = encodeHello({ ...parseHello(hello), clientRank: 3 });
    expect(proofMatches(p, clientProof(secret, other, nonce))).toBe(false);
  });

  it('derives distinct per-direction keys per connection', () => {
    const k1 = deriveSessionKeys(secret, hello, nonce);
    const k2 = deriveSessionKeys(secret, hello, newNonce());
    expect(k1.clientToServer.equals(k1.serverToClient)).toBe(false);
    expect(k1.clientToServer.equals(k2.clientToServer)).toBe(false);
  });
});

describe('frame AEAD', () => {
  for (const cipher of ['aes-256-gcm', 'chacha20-poly1305'] as const) {
    it(`${cipher}: round-trips, and rejects tampered payload, header or sequence`, () => {
      const key = Buffer.alloc(32, 9);
      const header = Uint8Array.from({ length: 16 }, (_, i) => i);
      const payload = Uint8Array.from({ length: 1000 }, (_, i) => (i * 3) & 255);
      const [ct, tag] = new FrameSealer(cipher, key).seal(5, header, payload);
      expect(Buffer.from(ct).equals(Buffer.from(payload))).toBe(false);
      const open = new FrameOpener(cipher, key);
      const data = Uint8Array.from(ct);
      open.open(5, header, data, tag);
      expect(Buffer.from(data).equals(Buffer.from(payload))).toBe(true);
      const flipped = Uint8Array.from(ct);
      flipped[10] ^= 1;
      expect(() => open.open(5, header, flipped, tag)).toThrow(FrameError);
      const badHeader = Uint8Array.from(header);
      badHeader[4] ^= 1;
      expect(() => open.open(5, badHeader, Uint8Array.from(ct), tag)).toThrow(FrameError);
      expect(() => open.open(6, header, Uint8Array.from(ct), tag)).toThrow(FrameError);
    });
  }
});
