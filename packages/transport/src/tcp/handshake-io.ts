/**
 * Runs the handshake of wire/handshake.ts over a fresh socket. The server reads exactly the bytes
 * the protocol allows and nothing more before the client is proven; anything else (wrong magic,
 * wrong group, bad proof, extra bytes, silence past the deadline) destroys the socket.
 */
import type { Socket } from 'node:net';
import { AuthError } from '../errors.js';
import type { CipherName } from '../wire/aead.js';
import type { ConnectionKeys } from './connection.js';
import {
  CHALLENGE_BYTES,
  FLAG_ENCRYPT,
  HELLO_FIXED_BYTES,
  HELLO_MAGIC,
  OK_BYTES,
  PROOF_BYTES,
  cipherOf,
  clientProof,
  deriveSessionKeys,
  encodeChallenge,
  encodeHello,
  encodeOk,
  isOk,
  newNonce,
  parseChallenge,
  parseHello,
  parseHelloFixed,
  proofMatches,
  serverProof,
  type Hello,
  type Purpose,
  type SessionKeys,
} from '../wire/handshake.js';

/** Reads exact byte counts from a socket during the handshake; detaches cleanly afterwards. */
export class ExactReader {
  #chunks: Buffer[] = [];
  #buffered = 0;
  #want = 0;
  #waiter: { resolve: (b: Buffer) => void; reject: (e: Error) => void } | null = null;
  #failed: Error | null = null;
  readonly #onData = (chunk: Buffer) => {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    this.#pump();
  };
  readonly #onEnd = () => this.#fail(new AuthError('connection closed during handshake'));
  readonly #onError = (err: Error) => this.#fail(new AuthError(`socket error during handshake: ${err.message}`, { cause: err }));

  constructor(private readonly socket: Socket) {
    socket.on('data', this.#onData);
    socket.on('end', this.#onEnd);
    socket.on('close', this.#onEnd);
    socket.on('error', this.#onError);
    socket.resume();
  }

  read(n: number): Promise<Buffer> {
    if (this.#failed) return Promise.reject(this.#failed);
    return new Promise((resolve, reject) => {
      this.#want = n;
      this.#waiter = { resolve, reject };
      this.#pump();
    });
  }

  /** Bytes received beyond what was read (a well-behaved peer sends none). */
  get extra(): number {
    return this.#buffered;
  }

  /** Stops listening and pauses the socket (so no byte is lost before the next owner attaches). */
  detach(): Buffer {
    this.socket.pause();
    this.socket.off('data', this.#onData);
    this.socket.off('end', this.#onEnd);
    this.socket.off('close', this.#onEnd);
    this.socket.off('error', this.#onError);
    const rest = Buffer.concat(this.#chunks);
    this.#chunks = [];
    this.#buffered = 0;
    return rest;
  }

  #fail(err: Error): void {
    if (this.#failed) return;
    this.#failed = err;
    const w = this.#waiter;
    this.#waiter = null;
    w?.reject(err);
  }

  #pump(): void {
    if (!this.#waiter || this.#buffered < this.#want) return;
    const all = this.#chunks.length === 1 ? this.#chunks[0] : Buffer.concat(this.#chunks);
    const out = all.subarray(0, this.#want);
    const rest = all.subarray(this.#want);
    this.#chunks = rest.length ? [rest] : [];
    this.#buffered = rest.length;
    const w = this.#waiter;
    this.#waiter = null;
    w.resolve(out);
  }
}

function withDeadline<T>(p: Promise<T>, ms: number, socket: Socket, what: string, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      cleanup();
      socket.destroy();
      reject(signal?.reason ?? new AuthError(`${what}: aborted`));
    };
    const timer = setTimeout(() => {
      cleanup();
      socket.destroy();
      reject(new AuthError(`${what}: no answer within ${ms} ms`));
    }, ms);
    const cleanup = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        cleanup();
        resolve(v);
      },
      (e) => {
        cleanup();
        reject(e);
      },
    );
  });
}

/** The two ends of a connection, as this end sees them. */
export interface SocketEnds {
  /** This end's address on the connection (the interface it leaves by). */
  localAddress: string;
  /** The other end's address as seen from here. */
  remoteAddress: string;
}

export function socketEnds(socket: Socket): SocketEnds {
  return { localAddress: socket.localAddress ?? '', remoteAddress: socket.remoteAddress ?? '' };
}

/** This end's keys after an encrypted handshake (each end sends with its own direction's key), or null. */
export function directionKeys(hs: HandshakeResult, asClient: boolean): ConnectionKeys | null {
  const e = hs.encryption;
  if (!e) return null;
  const { clientToServer: c2s, serverToClient: s2c } = e.keys;
  return { cipher: e.cipher, sendKey: asClient ? c2s : s2c, recvKey: asClient ? s2c : c2s };
}

export interface HandshakeResult {
  hello: Hello;
  /** The cipher and per-direction keys when the connection is encrypted, else null. */
  encryption: { cipher: CipherName; keys: SessionKeys } | null;
  /** Bytes that arrived after the handshake and belong to the frame stream. */
  leftover: Buffer;
}

export interface ClientHandshakeParams {
  secret: Uint8Array;
  groupId: string;
  purpose: Purpose;
  clientRank: number;
  serverRank: number;
  /**
   * Hello flags: FLAG_ENCRYPT when this end wants the connection encrypted (the server may ask for
   * it too), and the cipher proposed (cipherFlag), which is used if the connection is encrypted.
   */
  flags: number;
  timeoutMs: number;
  signal?: AbortSignal;
}

export async function clientHandshake(socket: Socket, p: ClientHandshakeParams): Promise<HandshakeResult> {
  const reader = new ExactReader(socket);
  const run = async (): Promise<HandshakeResult> => {
    const helloMsg: Hello = {
      flags: p.flags,
      purpose: p.purpose,
      clientRank: p.clientRank,
      serverRank: p.serverRank,
      clientNonce: newNonce(),
      groupId: p.groupId,
    };
    const hello = encodeHello(helloMsg);
    socket.write(hello);
    const challenge = parseChallenge(await reader.read(CHALLENGE_BYTES));
    if (!proofMatches(serverProof(p.secret, hello, challenge.flags, challenge.serverNonce), challenge.proof)) {
      throw new AuthError('server failed to prove the group secret (wrong secret or not our group)');
    }
    const encrypted = (challenge.flags & FLAG_ENCRYPT) !== 0;
    if (p.flags & FLAG_ENCRYPT && !encrypted) throw new AuthError('server would not encrypt the connection, and this end requires it');
    socket.write(clientProof(p.secret, hello, challenge.flags, challenge.serverNonce));
    const ok = await reader.read(OK_BYTES);
    if (!isOk(ok)) throw new AuthError('server refused the handshake');
    const encryption = encrypted ? { cipher: cipherOf(p.flags), keys: deriveSessionKeys(p.secret, hello, challenge.serverNonce) } : null;
    return { hello: helloMsg, encryption, leftover: reader.detach() };
  };
  try {
    return await withDeadline(run(), p.timeoutMs, socket, 'handshake', p.signal);
  } catch (err) {
    reader.detach();
    socket.destroy();
    throw err;
  }
}

export interface ServerHandshakeParams {
  secret: Uint8Array;
  /** Decides whether a hello is acceptable (group, ranks, purpose, flags); throws AuthError if not. */
  accept(hello: Hello): void;
  /** Whether this end wants the connection encrypted (it is when either end does). @default never */
  wantsEncryption?(hello: Hello): boolean;
  timeoutMs: number;
}

export async function serverHandshake(socket: Socket, p: ServerHandshakeParams): Promise<HandshakeResult> {
  const reader = new ExactReader(socket);
  const run = async (): Promise<HandshakeResult> => {
    // Check the magic before waiting for the rest, so a stranger is dropped on its first bytes.
    const magic = await reader.read(4);
    if (magic.readUInt32BE(0) !== HELLO_MAGIC) throw new AuthError('not an Orchard data-plane client (bad hello magic)');
    const fixed = Buffer.concat([magic, await reader.read(HELLO_FIXED_BYTES - 4)]);
    const { idLength } = parseHelloFixed(fixed);
    const hello = Buffer.concat([fixed, idLength ? await reader.read(idLength) : Buffer.alloc(0)]);
    const parsed = parseHello(hello);
    p.accept(parsed);
    const encrypted = (parsed.flags & FLAG_ENCRYPT) !== 0 || (p.wantsEncryption?.(parsed) ?? false);
    const flags = encrypted ? FLAG_ENCRYPT : 0;
    const serverNonce = newNonce();
    socket.write(encodeChallenge(flags, serverNonce, serverProof(p.secret, hello, flags, serverNonce)));
    const received = await reader.read(PROOF_BYTES);
    if (!proofMatches(clientProof(p.secret, hello, flags, serverNonce), received)) {
      throw new AuthError(`client claiming rank ${parsed.clientRank} failed to prove the group secret`);
    }
    if (reader.extra > 0) throw new AuthError('client sent data before the handshake finished');
    socket.write(encodeOk());
    const encryption = encrypted ? { cipher: cipherOf(parsed.flags), keys: deriveSessionKeys(p.secret, hello, serverNonce) } : null;
    return { hello: parsed, encryption, leftover: reader.detach() };
  };
  try {
    return await withDeadline(run(), p.timeoutMs, socket, 'handshake');
  } catch (err) {
    reader.detach();
    socket.destroy();
    throw err;
  }
}
