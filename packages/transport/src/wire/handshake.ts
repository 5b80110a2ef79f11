/**
 * The data-plane handshake, as pure message codecs and proofs (no I/O).
 *
 *   client -> server  HELLO      magic "ORC1" | flags u8 | purpose u8 | idLen u8 | clientRank u32 |
 *                                serverRank u32 | clientNonce[32] | groupId[idLen]
 *   server -> client  CHALLENGE  magic "ORS1" | serverNonce[32] | serverProof[32]
 *   client -> server  PROOF      clientProof[32]
 *   server -> client  OK         magic "ORK1"
 *
 * Proofs are HMAC-SHA256 under the group secret over the whole transcript (HELLO bytes and the
 * server nonce) with a role label, so both sides prove knowledge of the secret, a proof cannot be
 * replayed for another nonce, group, rank pair or role, and the server proves itself first only
 * over the client's fresh nonce. Nothing but these messages is read from a client before OK.
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { AuthError } from '../errors.js';

export const HELLO_MAGIC = 0x4f524331; // "ORC1"
export const CHALLENGE_MAGIC = 0x4f525331; // "ORS1"
export const OK_MAGIC = 0x4f524b31; // "ORK1"
export const NONCE_BYTES = 32;
export const PROOF_BYTES = 32;
/** Fixed part of HELLO, before the group id. */
export const HELLO_FIXED_BYTES = 4 + 1 + 1 + 1 + 4 + 4 + NONCE_BYTES;
export const CHALLENGE_BYTES = 4 + NONCE_BYTES + PROOF_BYTES;
export const OK_BYTES = 4;
export const MAX_GROUP_ID_BYTES = 255;

/**
 * What a connection is for; a probe secret cannot open a data connection and vice versa. `Stream`:
 * an authenticated byte stream for another protocol (authenticated-socket.ts), named by its group id.
 */
export const Purpose = { Data: 1, Probe: 2, Stream: 3 } as const;
export type Purpose = (typeof Purpose)[keyof typeof Purpose];

export const FLAG_ENCRYPT = 1;

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

function proof(secret: Uint8Array, role: 'server' | 'client', hello: Uint8Array, serverNonce: Uint8Array): Buffer {
  return createHmac('sha256', secret)
    .update(`orchard-handshake-v1 ${role}\0`)
    .update(hello)
    .update(serverNonce)
    .digest();
}

export function serverProof(secret: Uint8Array, hello: Uint8Array, serverNonce: Uint8Array): Buffer {
  return proof(secret, 'server', hello, serverNonce);
}

export function clientProof(secret: Uint8Array, hello: Uint8Array, serverNonce: Uint8Array): Buffer {
  return proof(secret, 'client', hello, serverNonce);
}

/** Constant-time comparison of a received proof with the expected one. */
export function proofMatches(expected: Uint8Array, received: Uint8Array): boolean {
  return expected.length === received.length && timingSafeEqual(expected, received);
}

export function encodeChallenge(serverNonce: Uint8Array, proofBytes: Uint8Array): Buffer {
  const out = Buffer.alloc(CHALLENGE_BYTES);
  out.writeUInt32BE(CHALLENGE_MAGIC, 0);
  out.set(serverNonce, 4);
  out.set(proofBytes, 4 + NONCE_BYTES);
  return out;
}

export function parseChallenge(bytes: Uint8Array): { serverNonce: Uint8Array; proof: Uint8Array } {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length !== CHALLENGE_BYTES || b.readUInt32BE(0) !== CHALLENGE_MAGIC) {
    throw new AuthError('server is not an Orchard data-plane endpoint (bad challenge)');
  }
  return { serverNonce: b.subarray(4, 4 + NONCE_BYTES), proof: b.subarray(4 + NONCE_BYTES) };
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
