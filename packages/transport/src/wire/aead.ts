/**
 * Optional frame encryption for untrusted networks: AES-256-GCM or ChaCha20-Poly1305 from
 * node:crypto, one key per direction (derived in the handshake), nonce = frame sequence number,
 * the 16-byte frame header as associated data and the 16-byte tag as the frame trailer.
 */
import { createCipheriv, createDecipheriv, type CipherGCM, type DecipherGCM } from 'node:crypto';
import { FrameError } from '../errors.js';

export type CipherName = 'aes-256-gcm' | 'chacha20-poly1305';
export const AEAD_TAG_BYTES = 16;

function nonce(seq: number): Buffer {
  const n = Buffer.alloc(12);
  n.writeUInt32BE(seq >>> 0, 8);
  return n;
}

export class FrameSealer {
  constructor(
    private readonly cipher: CipherName,
    private readonly key: Buffer,
  ) {}

  /** Returns [ciphertext, tag] for one frame. */
  seal(seq: number, header: Uint8Array, payload: Uint8Array): [Buffer, Buffer] {
    const c = createCipheriv(this.cipher, this.key, nonce(seq), { authTagLength: AEAD_TAG_BYTES } as never) as unknown as CipherGCM;
    c.setAAD(header, { plaintextLength: payload.length });
    const ct = c.update(payload);
    c.final();
    return [ct, c.getAuthTag()];
  }
}

export class FrameOpener {
  constructor(
    private readonly cipher: CipherName,
    private readonly key: Buffer,
  ) {}

  /** Decrypts `data` in place; throws FrameError if the frame was tampered with. */
  open(seq: number, header: Uint8Array, data: Uint8Array, tag: Uint8Array): void {
    const d = createDecipheriv(this.cipher, this.key, nonce(seq), { authTagLength: AEAD_TAG_BYTES } as never) as unknown as DecipherGCM;
    d.setAAD(header, { plaintextLength: data.length });
    d.setAuthTag(tag);
    const pt = d.update(data);
    try {
      d.final();
    } catch {
      throw new FrameError(`frame ${seq} failed authentication (tampered, or keys do not match)`);
    }
    data.set(pt);
  }
}
