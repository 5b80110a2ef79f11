/**
 * A bound data-plane port. It exists before the group does, so a rank can bind port 0, tell the
 * control plane its real port, and only then learn its peers. Connections that arrive before a
 * group takes the listener over are held unread (not a byte is consumed) until then.
 */
import net, { type Socket } from 'node:net';
import { ConnectError } from '../errors.js';
import { ReadRouter } from './read-router.js';

export interface TcpAddress {
  host: string;
  port: number;
}

export interface TcpListener {
  /** Where this listener is reachable (the bound port, never 0). */
  readonly address: TcpAddress;
  /** Close the port and drop held connections. Idempotent. */
  close(): Promise<void>;
}

/** Internal view used by the TCP group. */
export interface TcpListenerInternal extends TcpListener {
  /** Route incoming sockets (including held ones) to `handler`, with their zero-copy read router. */
  take(handler: (socket: Socket, router: ReadRouter | null) => void): void;
}

export interface ListenTcpOptions {
  /** @default '127.0.0.1' — listen on a LAN address only when asked to. */
  host?: string;
  /** @default 0 (any free port) */
  port?: number;
  /** Held connections are dropped after this long without a group, ms. @default 30000 */
  holdMs?: number;
}

export async function listenTcp(options: ListenTcpOptions = {}): Promise<TcpListener> {
  const host = options.host ?? '127.0.0.1';
  const holdMs = options.holdMs ?? 30_000;
  const held = new Map<Socket, ReadRouter | null>();
  const live = new Set<Socket>();
  let handler: ((socket: Socket, router: ReadRouter | null) => void) | null = null;
  const server = net.createServer({ pauseOnConnect: true, noDelay: true }, (accepted) => {
    const router = new ReadRouter();
    const adopted = router.adopt(accepted);
    const socket = adopted ?? accepted;
    live.add(socket);
    socket.once('close', () => {
      live.delete(socket);
      held.delete(socket);
    });
    socket.on('error', () => socket.destroy());
    if (handler) return handler(socket, adopted ? router : null);
    held.set(socket, adopted ? router : null);
    setTimeout(() => {
      if (held.delete(socket)) socket.destroy();
    }, holdMs).unref();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new ConnectError({ address: `${host}:${options.port ?? 0}` }, `cannot listen: ${err.message}`, { cause: err })));
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  let closed: Promise<void> | null = null;
  const listener: TcpListenerInternal = {
    address: { host, port },
    take(h) {
      handler = h;
      for (const [s, r] of held) h(s, r);
      held.clear();
    },
    close() {
      // Stops accepting at once. Connections already handed to a group stay open (the group owns
      // them), so do not wait for server.close's callback, which waits for those too.
      closed ??= new Promise<void>((resolve) => {
        handler = null;
        for (const s of held.keys()) s.destroy();
        held.clear();
        server.close();
        resolve();
      });
      return closed;
    },
  };
  return listener;
}
