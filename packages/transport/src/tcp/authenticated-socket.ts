/**
 * A TCP byte stream that passed the data plane's HMAC handshake (wire/handshake.ts), for protocols
 * other than the collectives that must stay inside a pod's key — the daemon moves model weights
 * over it. The protocol's name travels as the handshake's group id, so a secret handed out for one
 * protocol opens neither the data plane nor another protocol's sockets. Encryption is negotiated
 * as on the data plane (either end may ask; the cipher is the client's): an encrypted connection's
 * bytes travel sealed (sealed-stream.ts), a plain one's as they are.
 */
import net, { type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { AuthError, ConnectError } from '../errors.js';
import { proposedCipher, type CipherName } from '../wire/aead.js';
import { FLAG_CHACHA, FLAG_ENCRYPT, helloFlags, Purpose } from '../wire/handshake.js';
import { clientHandshake, directionKeys, serverHandshake, socketEnds, type HandshakeResult, type SocketEnds } from './handshake-io.js';
import { SealedStream } from './sealed-stream.js';

export type { SocketEnds } from './handshake-io.js';

/** Whether this end wants a connection encrypted, and the cipher it proposes when it dials. */
export interface StreamEncryption {
  wants(ends: SocketEnds): boolean;
  /** @default 'auto' (the faster one on this machine) */
  cipher?: CipherName | 'auto';
}

export interface AuthenticatedSocket {
  /** The TCP socket, for its addresses and options; its bytes are the stream's (sealed when encrypted). */
  socket: Socket;
  /**
   * The caller's bytes, the first of them already in it; paused until the caller reads (a 'data'
   * listener or resume()). The socket itself when the connection is plain.
   */
  stream: Duplex;
  /** The cipher protecting the stream, or null for plain. */
  cipher: CipherName | null;
}

export interface ConnectAuthenticatedOptions {
  host: string;
  port: number;
  secret: Uint8Array;
  /** The protocol's name (at most 255 bytes), the same on both ends. */
  protocol: string;
  /** Connect and handshake deadline. @default 5000 */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** @default never (plain, unless the server asks) */
  encryption?: StreamEncryption;
}

/** The stream of a finished handshake; `client` says which of the session keys this end sends with. */
function streamOf(socket: Socket, hs: HandshakeResult, client: boolean): AuthenticatedSocket {
  const keys = directionKeys(hs, client);
  if (!keys) {
    if (hs.leftover.length) socket.unshift(hs.leftover);
    return { socket, stream: socket, cipher: null };
  }
  const stream = new SealedStream(socket, hs.leftover, keys);
  stream.pause();
  return { socket, stream, cipher: keys.cipher };
}

export async function connectAuthenticated(o: ConnectAuthenticatedOptions): Promise<AuthenticatedSocket> {
  const address = `${o.host}:${o.port}`;
  const timeoutMs = o.timeoutMs ?? 5000;
  const socket = new net.Socket();
  const signal = o.signal ? AbortSignal.any([o.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);
  try {
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(new ConnectError({ address }, o.signal?.aborted ? 'aborted' : `no answer within ${timeoutMs} ms`));
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      socket.once('error', (err) => reject(new ConnectError({ address }, err.message, { cause: err })));
      socket.connect({ host: o.host, port: o.port, noDelay: true }, () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  } catch (err) {
    socket.destroy();
    throw err;
  }
  const hs = await clientHandshake(socket, {
    secret: o.secret,
    groupId: o.protocol,
    purpose: Purpose.Stream,
    clientRank: 0,
    serverRank: 0,
    flags: helloFlags(o.encryption?.wants(socketEnds(socket)) ?? false, proposedCipher(o.encryption?.cipher)),
    timeoutMs,
    signal: o.signal,
  });
  return streamOf(socket, hs, true);
}

/**
 * Runs the server half on an accepted socket; resolves once the client proved the secret. A client
 * that fails (wrong secret, other purpose or protocol, silence) has its socket destroyed and rejects.
 */
export async function acceptAuthenticated(socket: Socket, o: { secret: Uint8Array; protocol: string; timeoutMs?: number; encryption?: StreamEncryption }): Promise<AuthenticatedSocket> {
  const hs = await serverHandshake(socket, {
    secret: o.secret,
    timeoutMs: o.timeoutMs ?? 5000,
    accept(hello) {
      if (hello.purpose !== Purpose.Stream || hello.groupId !== o.protocol || (hello.flags & ~(FLAG_ENCRYPT | FLAG_CHACHA)) !== 0) {
        throw new AuthError(`not a ${o.protocol} client`);
      }
    },
    wantsEncryption: () => o.encryption?.wants(socketEnds(socket)) ?? false,
  });
  return streamOf(socket, hs, false);
}
