/**
 * The data-plane handshake, as pure message codecs and proofs (no I/O).
 *
 *   client -> server  HELLO      magic "ORC2" | flags u8 | purpose u8 | idLen u8 | clientRank u32 |
 *                                serverRank u32 | clientNonce[32] | groupId[idLen]
 *   server -> client  CHALLENGE  magic "ORS2" | flags u8 | serverNonce[32] | serverProof[32]
 *   client -> server  PROOF      clientProof[32]
 *   server -> client  OK         magic "ORK1"
 *
 * Proofs are HMAC-SHA256 under the group secret over the whole transcript (HELLO bytes, the
 * server's flags and nonce) with a role label, so both sides prove knowledge of the secret, a proof
 * cannot be replayed for another nonce, group, rank pair or role, and the server proves itself
 * first only over the client's fresh nonce. Nothing but these messages is read from a client
 * before OK.
 *
 * Encryption is negotiated: the client's HELLO flags say whether it wants the connection encrypted
 * and which cipher it proposes, the server's CHALLENGE flags say whether it will be (the client's
 * wish or the server's own), and the client refuses a server that answers "plain" to a request for
 * encryption. Both flag bytes are under the proofs, so no one without the secret can downgrade a
 * connection. (Version 2; a version-1 peer fails at the first magic.)
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { AuthError } from '../errors.js';
import type { CipherName } from './aead.js';

export const HELLO_MAGIC = 0x4f524332; // "ORC2"
export const CHALLENGE_MAGIC = 0x4f525332; // "ORS2"
export const OK_MAGIC = 0x4f524b31; // "ORK1"
export const NONCE_BYTES = 32;
export const PROOF_BYTES = 32;
/** Fixed part of HELLO, before the group id. */
export const HELLO_FIXED_BYTES = 4 + 1 + 1 + 1 + 4 + 4 + NONCE_BYTES;
export const CHALLENGE_BYTES = 4 + 1 + NONCE_BYTES + PROOF_BYTES;
export const OK_BYTES = 4;
export const MAX_GROUP_ID_BYTES = 255;

/**
 * What a connection is for; a probe secret cannot open a data connection and vice versa. `Stream`:
 * an authenticated byte stream for another protocol (authenticated-socket.ts), named by its group id.
 */
export const Purpose = { Data: 1, Probe: 2, Stream: 3 } as const;
export type Purpose = (typeof Purpose)[keyof typeof Purpose];

/** HELLO: the client wants the connection encrypted. CHALLENGE: it will be. */
export const FLAG_ENCRYPT = 1;
/** HELLO: the client proposes ChaCha20-Poly1305 (else AES-256-GCM); the client's proposal is used. */
export const FLAG_CHACHA = 2;

/** The cipher bit of HELLO flags. */
export function cipherFlag(cipher: CipherName): number {
  return cipher === 'chacha20-poly1305' ? FLAG_CHACHA : 0;
}

/** A dialer's HELLO flags: whether it wants the connection encrypted, and the cipher it proposes. */
export function helloFlags(encrypt: boolean, cipher: CipherName): number {
  return (encrypt ? FLAG_ENCRYPT : 0) | cipherFlag(cipher);
}

/** The cipher a HELLO proposes. */
export function cipherOf(helloFlags: number): CipherName {
  return helloFlags & FLAG_CHACHA ? 'chacha20-poly1305' : 'aes-256-gcm';
}

export interface Hello {
  flags: number;
  purpose: Purpose;
  clientRank: number;
  serverRank: number;
  clientNonce: Uint8Array;
  groupId: string;
}

export function newNonce(): Uint8Array {
  return randomBytes(NONCE_BYTES);
}

export function encodeHello(h: Hello): Buffer {
  const id = Buffer.from(h.groupId, 'utf8');
  if (id.length > MAX_GROUP_ID_BYTES) {
    throw new AuthError(`group id is ${id.length} bytes; at most ${MAX_GROUP_ID_BYTES} allowed`);
  }
  if (h.clientNonce.length !== NONCE_BYTES) throw new AuthError('client nonce must be 32 bytes');
  const out = Buffer.alloc(HELLO_FIXED_BYTES + id.length);
  out.writeUInt32BE(HELLO_MAGIC, 0);
  out.writeUInt8(h.flags, 4);
  out.writeUInt8(h.purpose, 5);
  out.writeUInt8(id.length, 6);
  out.writeUInt32BE(h.clientRank, 7);
  out.writeUInt32BE(h.serverRank, 11);
  out.set(h.clientNonce, 15);
  out.set(id, HELLO_FIXED_BYTES);
  return out;
}

/** Parses the fixed part; returns the group id length still to read. Throws on a foreign client. */
export function parseHelloFixed(fixed: Uint8Array): { idLength: number } {
  const b = Buffer.from(fixed.buffer, fixed.byteOffset, fixed.byteLength);
  if (b.length < HELLO_FIXED_BYTES || b.readUInt32BE(0) !== HELLO_MAGIC) {
    throw new AuthError('not an Orchard data-plane client (bad hello magic)');
  }
  return { idLength: b.readUInt8(6) };
}

export function parseHello(bytes: Uint8Array): Hello {
  const { idLength } = parseHelloFixed(bytes);
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length !== HELLO_FIXED_BYTES + idLength) throw new AuthError('hello has the wrong length');
  return {
    flags: b.readUInt8(4),
    purpose: b.readUInt8(5) as Purpose,
    clientRank: b.readUInt32BE(7),
    serverRank: b.readUInt32BE(11),
    clientNonce: Uint8Array.prototype.slice.call(b, 15, 15 + NONCE_BYTES),
    groupId: b.toString('utf8', HELLO_FIXED_BYTES),
  };
}

function proof(secret: Uint8Array, role: 'server' | 'client', hello: Uint8Array, serverFlags: number, serverNonce: Uint8Array): Buffer {
  return createHmac('sha256', secret)
    .update(`orchard-handshake-v2 ${role}\0`)
    .update(hello)
    .update(Uint8Array.of(serverFlags))
    .update(serverNonce)
    .digest();
}

export function serverProof(secret: Uint8Array, hello: Uint8Array, serverFlags: number, serverNonce: Uint8Array): Buffer {
  return proof(secret, 'server', hello, serverFlags, serverNonce);
}

export function clientProof(secret: Uint8Array, hello: Uint8Array, serverFlags: number, serverNonce: Uint8Array): Buffer {
  return proof(secret, 'client', hello, serverFlags, serverNonce);
}

/** Constant-time comparison of a received proof with the expected one. */
export function proofMatches(expected: Uint8Array, received: Uint8Array): boolean {
  return expected.length === received.length && timingSafeEqual(expected, received);
}

export function encodeChallenge(serverFlags: number, serverNonce: Uint8Array, proofBytes: Uint8Array): Buffer {
  const out = Buffer.alloc(CHALLENGE_BYTES);
  out.writeUInt32BE(CHALLENGE_MAGIC, 0);
  out.writeUInt8(serverFlags, 4);
  out.set(serverNonce, 5);
  out.set(proofBytes, 5 + NONCE_BYTES);
  return out;
}

export function parseChallenge(bytes: Uint8Array): { flags: number; serverNonce: Uint8Array; proof: Uint8Array } {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length !== CHALLENGE_BYTES || b.readUInt32BE(0) !== CHALLENGE_MAGIC) {
    throw new AuthError('server is not an Orchard data-plane endpoint of this version (bad challenge)');
  }
  return { flags: b.readUInt8(4), serverNonce: b.subarray(5, 5 + NONCE_BYTES), proof: b.subarray(5 + NONCE_BYTES) };
}

export function encodeOk(): Buffer {
  const out = Buffer.alloc(OK_BYTES);
  out.writeUInt32BE(OK_MAGIC, 0);
  return out;
}

export function isOk(bytes: Uint8Array): boolean {
  return bytes.length === OK_BYTES && Buffer.from(bytes.buffer, bytes.byteOffset, 4).readUInt32BE(0) === OK_MAGIC;
}

export interface SessionKeys {
  /** Key for frames the client sends. */
  clientToServer: Buffer;
  /** Key for frames the server sends. */
  serverToClient: Buffer;
}

/** Per-connection AEAD keys, bound to both nonces so every connection gets fresh keys. */
export function deriveSessionKeys(secret: Uint8Array, hello: Uint8Array, serverNonce: Uint8Array): SessionKeys {
  const salt = Buffer.concat([hello, serverNonce]);
  const key = (label: string) => Buffer.from(hkdfSync('sha256', secret, salt, `orchard-frames-v1 ${label}`, 32));
  return { clientToServer: key('c2s'), serverToClient: key('s2c') };
}

/** Accepts a secret as bytes or a string (utf8). */
export function secretBytes(secret: Uint8Array | string | undefined): Uint8Array {
  if (secret === undefined) return new Uint8Array(0);
  return typeof secret === 'string' ? Buffer.from(secret, 'utf8') : secret;
}
