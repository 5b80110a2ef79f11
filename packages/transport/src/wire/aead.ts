/**
 * Frame encryption: AES-256-GCM or ChaCha20-Poly1305 from node:crypto, one key per direction
 * (derived in the handshake), nonce = frame sequence number, the 16-byte frame header as associated
 * data and the 16-byte tag as the frame trailer. One AEAD message per frame, so the wire is the
 * same whether a frame is sealed at once or piece by piece.
 *
 * Why pieces: a frame sealed whole is encrypted before its first byte is sent and decrypted after
 * its last arrived, and node:crypto returns every output in a fresh buffer. For a 64 MiB frame that
 * is three passes one after the other (encrypt, transfer, decrypt) and two fresh 64 MiB allocations
 * per frame, whose first touch of each page costs more than the cipher (a page fault per 4 KiB; ~50
 * us each on the development VM). Sealed and opened in pieces of `AEAD_PIECE_BYTES`, the sender
 * encrypts piece k+1 while piece k travels and the receiver decrypts each read as it lands, and the
 * outputs are small enough to come from (and go back to) the allocator's heap (see process-env.ts).
 *
 * The receiver writes plaintext into the receive buffer before the tag is checked at the end of
 * the frame; a frame that fails the check fails the connection, and its receive rejects, so no
 * caller ever sees those bytes as a completed message.
 */
import { createCipheriv, createDecipheriv, randomBytes, type CipherGCM, type DecipherGCM } from 'node:crypto';
import { FrameError } from '../errors.js';

export type CipherName = 'aes-256-gcm' | 'chacha20-poly1305';
export const CIPHERS: readonly CipherName[] = ['aes-256-gcm', 'chacha20-poly1305'];
export const AEAD_TAG_BYTES = 16;
/**
 * Largest piece given to the cipher at once. Data-plane processes keep allocations up to 32 MiB on
 * the heap and freed heap memory in the process (process-env.ts), so each output comes from memory
 * the previous pieces' outputs freed. Measured on the development VM (2 processes, 64 MiB frames,
 * AES-256-GCM, medians of 10): 1 MiB pieces took 53-59 ms of CPU per frame and side, 64 KiB pieces
 * 67-93 ms (16 times the calls and, on the sender, the write syscalls).
 */
export const AEAD_PIECE_BYTES = 1024 * 1024;

function nonce(seq: number): Buffer {
  const n = Buffer.alloc(12);
  n.writeUInt32BE(seq >>> 0, 8);
  return n;
}

/** One frame being sealed: ciphertext piece by piece, then the tag. */
export interface SealStream {
  /** Ciphertext of the next `piece` of the payload (same length). */
  update(piece: Uint8Array): Buffer;
  /** The tag; the stream is finished. */
  final(): Buffer;
}

/** One frame being opened in place: decrypt ranges as they arrive, then check the tag. */
export interface OpenStream {
  /** Replaces `data` (ciphertext, the next bytes of the payload) with its plaintext. */
  update(data: Uint8Array): void;
  /** Checks the tag; throws FrameError if the frame was tampered with. */
  final(tag: Uint8Array): void;
}

export class FrameSealer {
  constructor(
    private readonly cipher: CipherName,
    private readonly key: Buffer,
  ) {}

  begin(seq: number, header: Uint8Array, length: number): SealStream {
    const c = createCipheriv(this.cipher, this.key, nonce(seq), { authTagLength: AEAD_TAG_BYTES } as never) as unknown as CipherGCM;
    c.setAAD(header, { plaintextLength: length });
    return {
      update: (piece) => c.update(piece),
      final: () => {
        c.final();
        return c.getAuthTag();
      },
    };
  }

  /** Seals a whole frame: [ciphertext, tag]. */
  seal(seq: number, header: Uint8Array, payload: Uint8Array): [Buffer, Buffer] {
    const s = this.begin(seq, header, payload.length);
    const ct = s.update(payload);
    return [ct, s.final()];
  }
}

export class FrameOpener {
  constructor(
    private readonly cipher: CipherName,
    private readonly key: Buffer,
  ) {}

  begin(seq: number, header: Uint8Array, length: number): OpenStream {
    const d = createDecipheriv(this.cipher, this.key, nonce(seq), { authTagLength: AEAD_TAG_BYTES } as never) as unknown as DecipherGCM;
    d.setAAD(header, { plaintextLength: length });
    return {
      update: (data) => {
        for (let at = 0; at < data.length; at += AEAD_PIECE_BYTES) {
          const piece = data.subarray(at, Math.min(data.length, at + AEAD_PIECE_BYTES));
          piece.set(d.update(piece));
        }
      },
      final: (tag) => {
        d.setAuthTag(tag);
        try {
          d.final();
        } catch {
          throw new FrameError(`frame ${seq} failed authentication (tampered, or keys do not match)`);
        }
      },
    };
  }

  /** Opens a whole frame in place; throws FrameError if it was tampered with. */
  open(seq: number, header: Uint8Array, data: Uint8Array, tag: Uint8Array): void {
    const s = this.begin(seq, header, data.length);
    s.update(data);
    s.final(tag);
  }
}

/** Sealing throughput of each cipher on this machine, MB/s (pieces as the connection seals them). */
export function measureCiphers(bytes = 1024 * 1024): Record<CipherName, number> {
  const key = randomBytes(32);
  const header = new Uint8Array(16);
  const payload = new Uint8Array(bytes);
  const once = (cipher: CipherName): number => {
    const t0 = performance.now();
    const s = new FrameSealer(cipher, key).begin(1, header, bytes);
    for (let at = 0; at < bytes; at += AEAD_PIECE_BYTES) s.update(payload.subarray(at, at + AEAD_PIECE_BYTES));
    s.final();
    return performance.now() - t0;
  };
  const out = {} as Record<CipherName, number>;
  // Interleaved rounds, best of each: a load burst on a shared machine then hits both ciphers.
  const best: Record<string, number> = {};
  for (let round = 0; round < 3; round++) {
    for (const c of CIPHERS) best[c] = Math.min(best[c] ?? Infinity, once(c));
  }
  for (const c of CIPHERS) out[c] = bytes / 1e6 / (Math.max(best[c], 1e-3) / 1000);
  return out;
}

let fastest: CipherName | null = null;

/**
 * The cipher that seals fastest here, measured once per process (~10-30 ms): AES-256-GCM where the
 * CPU has AES instructions, usually ChaCha20-Poly1305 where it has not.
 */
export function fastestCipher(): CipherName {
  if (!fastest) {
    const speed = measureCiphers();
    fastest = speed['chacha20-poly1305'] > speed['aes-256-gcm'] ? 'chacha20-poly1305' : 'aes-256-gcm';
  }
  return fastest;
}

/** The cipher a dialer proposes: the one asked for, or the fastest here for 'auto' (and by default). */
export function proposedCipher(cipher: CipherName | 'auto' = 'auto'): CipherName {
  return cipher === 'auto' ? fastestCipher() : cipher;
}
