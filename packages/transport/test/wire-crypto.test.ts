import { describe, expect, it } from 'vitest';
import { FrameError } from '../src/errors.js';
import { AEAD_PIECE_BYTES, FrameOpener, FrameSealer, fastestCipher, measureCiphers } from '../src/wire/aead.js';
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

  it('binds the secret, the role, the nonces, the hello and the server flags', () => {
    const p = clientProof(secret, hello, 0, nonce);
    expect(proofMatches(p, clientProof(secret, hello, 0, nonce))).toBe(true);
    expect(proofMatches(p, clientProof(Buffer.from('other'), hello, 0, nonce))).toBe(false);
    expect(proofMatches(p, serverProof(secret, hello, 0, nonce))).toBe(false);
    expect(proofMatches(p, clientProof(secret, hello, 0, newNonce()))).toBe(false);
    // A server answer "plain" cannot be swapped for "encrypted" or back without the secret.
    expect(proofMatches(p, clientProof(secret, hello, 1, nonce))).toBe(false);
    const other = encodeHello({ ...parseHello(hello), clientRank: 3 });
    expect(proofMatches(p, clientProof(secret, other, 0, nonce))).toBe(false);
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

describe('frame AEAD in pieces', () => {
  for (const cipher of ['aes-256-gcm', 'chacha20-poly1305'] as const) {
    it(`${cipher}: sealing piece by piece equals sealing at once; opening in uneven ranges restores the payload`, () => {
      const key = Buffer.alloc(32, 3);
      const header = Uint8Array.from({ length: 16 }, (_, i) => 100 + i);
      const n = 2 * AEAD_PIECE_BYTES + 12345;
      const payload = Uint8Array.from({ length: n }, (_, i) => (i * 7 + (i >> 9)) & 255);
      const sealer = new FrameSealer(cipher, key);
      const [whole, wholeTag] = sealer.seal(9, header, payload);
      const s = sealer.begin(9, header, n);
      const pieces: Buffer[] = [];
      for (let at = 0; at < n; at += 5000) pieces.push(s.update(payload.subarray(at, at + 5000)));
      const tag = s.final();
      expect(Buffer.concat(pieces).equals(whole)).toBe(true);
      expect(tag.equals(wholeTag)).toBe(true);

      const data = Uint8Array.from(whole);
      const o = new FrameOpener(cipher, key).begin(9, header, n);
      // Ranges as socket reads deliver them: small, then larger than one piece.
      for (const [a, b] of [[0, 1], [1, 70_000], [70_000, 70_001], [70_001, n]]) o.update(data.subarray(a, b));
      o.final(tag);
      expect(Buffer.from(data).equals(Buffer.from(payload))).toBe(true);
    });

    it(`${cipher}: a tampered byte anywhere fails the tag at the end of the frame`, () => {
      const key = Buffer.alloc(32, 4);
      const header = new Uint8Array(16);
      const payload = new Uint8Array(AEAD_PIECE_BYTES * 2).fill(1);
      const [ct, tag] = new FrameSealer(cipher, key).seal(1, header, payload);
      ct[AEAD_PIECE_BYTES + 5] ^= 0x80;
      const o = new FrameOpener(cipher, key).begin(1, header, ct.length);
      o.update(ct);
      expect(() => o.final(tag)).toThrow(/frame 1 failed authentication/);
    });
  }

  it('measures both ciphers and picks one of them', () => {
    const speed = measureCiphers(256 * 1024);
    expect(speed['aes-256-gcm']).toBeGreaterThan(0);
    expect(speed['chacha20-poly1305']).toBeGreaterThan(0);
    expect(['aes-256-gcm', 'chacha20-poly1305']).toContain(fastestCipher());
  });
});
