/**
 * A raw TCP socket that passed the data plane's HMAC handshake (wire/handshake.ts), for protocols
 * other than the collectives that must stay inside a pod's key — the daemon moves model weights
 * over it. The protocol's name travels as the handshake's group id, so a secret handed out for one
 * protocol opens neither the data plane nor another protocol's sockets. After the handshake the
 * bytes are the caller's: plain TCP, no framing, no encryption.
 */
import net, { type Socket } from 'node:net';
import { AuthError, ConnectError } from '../errors.js';
import { Purpose } from '../wire/handshake.js';
import { clientHandshake, serverHandshake } from './handshake-io.js';

export interface AuthenticatedSocket {
  /** Paused, so no byte is lost before the caller's listeners are attached: resume() it then. */
  socket: Socket;
  /** Bytes that arrived right after the handshake; they belong to the caller's protocol. */
  leftover: Buffer;
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
  const { leftover } = await clientHandshake(socket, {
    secret: o.secret,
    groupId: o.protocol,
    purpose: Purpose.Stream,
    clientRank: 0,
    serverRank: 0,
    flags: 0,
    timeoutMs,
    signal: o.signal,
  });
  return { socket, leftover };
}

/**
 * Runs the server half on an accepted socket; resolves once the client proved the secret. A client
 * that fails (wrong secret, other purpose or protocol, silence) has its socket destroyed and rejects.
 */
export async function acceptAuthenticated(socket: Socket, o: { secret: Uint8Array; protocol: string; timeoutMs?: number }): Promise<AuthenticatedSocket> {
  const { leftover } = await serverHandshake(socket, {
    secret: o.secret,
    timeoutMs: o.timeoutMs ?? 5000,
    accept(hello) {
      if (hello.purpose !== Purpose.Stream || hello.groupId !== o.protocol || hello.flags !== 0) {
        throw new AuthError(`not a ${o.protocol} client`);
      }
    },
  });
  return { socket, leftover };
}
