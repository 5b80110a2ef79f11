/**
 * The TCP backend: a full mesh with one authenticated socket per pair of ranks. Rank r dials every
 * lower rank and accepts every higher one, so each pair connects exactly once.
 */
import type { Socket } from 'node:net';
import { AuthError, ConnectError, GroupClosedError, UsageError, describePeer } from '../errors.js';
import type { Group } from '../group.js';
import type { Exchange, ExchangeOpOptions } from '../collectives/exchange.js';
import { groupOverExchange, type CollectiveOptions } from '../exchange-group.js';
import { DEFAULT_TIMEOUT_MS } from '../collectives/tuning.js';
import { FLAG_ENCRYPT, Purpose, secretBytes, type Hello } from '../wire/handshake.js';
import type { CipherName } from '../wire/aead.js';
import { PeerConnection, type ConnectionKeys } from './connection.js';
import { clientHandshake, serverHandshake, type HandshakeResult } from './handshake-io.js';
import { ReadRouter } from './read-router.js';
import { listenTcp, type TcpAddress, type TcpListener, type TcpListenerInternal } from './listener.js';

/** Bit 1 of the hello flags selects ChaCha20-Poly1305 instead of AES-256-GCM. */
const FLAG_CHACHA = 2;

export interface TcpPeer {
  /** Addresses to try in order (one per cable or interface). */
  addresses: TcpAddress[];
}

export interface TcpGroupOptions extends CollectiveOptions {
  /** This process's rank. */
  rank: number;
  /** Every rank's endpoint, index = rank (this rank's entry is where it listens). */
  peers: TcpPeer[];
  /** Identifies this group; a connection for another group is refused. */
  groupId: string;
  /** Secret handed out by the control plane; peers must prove they hold it. */
  secret: Uint8Array | string;
  /** A listener bound earlier with `listenTcp`; the group takes it over and closes it. */
  listener?: TcpListener;
  /** Encrypt frames (for untrusted networks). @default false */
  encrypt?: false | CipherName;
  /** Time to reach every peer, ms. @default 10000 */
  connectTimeoutMs?: number;
  /** Deadline for one handshake, ms. @default 3000 */
  handshakeTimeoutMs?: number;
  /** Early frames kept per connection before the socket is paused, bytes. @default 256 MiB */
  maxUnexpectedBytes?: number;
  signal?: AbortSignal;
}

function flagsFor(encrypt: false | CipherName): number {
  if (!encrypt) return 0;
  return FLAG_ENCRYPT | (encrypt === 'chacha20-poly1305' ? FLAG_CHACHA : 0);
}

function validate(o: TcpGroupOptions): void {
  const size = o.peers?.length ?? 0;
  if (size < 1) throw new UsageError('createTcpGroup: peers must list every rank');
  if (!Number.isInteger(o.rank) || o.rank < 0 || o.rank >= size) {
    throw new UsageError(`createTcpGroup: rank must be in 0..${size - 1}, got ${o.rank}`);
  }
  o.peers.forEach((p, r) => {
    if (r !== o.rank && !p?.addresses?.length) throw new UsageError(`createTcpGroup: peers[${r}] has no addresses`);
  });
  if (typeof o.groupId !== 'string' || o.groupId.length === 0) throw new UsageError('createTcpGroup: groupId must be a non-empty string');
  if (o.encrypt && o.encrypt !== 'aes-256-gcm' && o.encrypt !== 'chacha20-poly1305') {
    throw new UsageError(`createTcpGroup: encrypt must be false, 'aes-256-gcm' or 'chacha20-poly1305', got ${String(o.encrypt)}`);
  }
}

/** Connects to every peer and returns the group once the mesh is complete. */
export async function createTcpGroup(options: TcpGroupOptions): Promise<Group> {
  validate(options);
  const { rank, peers, groupId } = options;
  const size = peers.length;
  const secret = secretBytes(options.secret);
  const encrypt = options.encrypt ?? false;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  const handshakeTimeoutMs = options.handshakeTimeoutMs ?? 3000;
  const connOptions = {
    maxUnexpectedBytes: options.maxUnexpectedBytes ?? 256 * 1024 * 1024,
    watchdogMs: Math.max(5, Math.min(100, timeoutMs / 5)),
  };
  const conns: (PeerConnection | null)[] = new Array(size).fill(null);
  const keysFor = (hs: HandshakeResult, asClient: boolean): ConnectionKeys | null =>
    hs.keys && encrypt
      ? { cipher: encrypt, sendKey: asClient ? hs.keys.clientToServer : hs.keys.serverToClient, recvKey: asClient ? hs.keys.serverToClient : hs.keys.clientToServer }
      : null;

  if (size === 1) {
    await options.listener?.close();
    return groupOverExchange(new TcpExchange(rank, conns), options);
  }

  const listener = (options.listener ?? (await listenTcp(peers[rank]?.addresses?.[0] ?? {}))) as TcpListenerInternal;
  const abort = new AbortController();
  const onOuterAbort = () => abort.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onOuterAbort, { once: true });

  // Higher ranks dial us.
  const waiting = new Map<number, { resolve: () => void }>();
  const accepted = Promise.all(
    Array.from({ length: size - rank - 1 }, (_, i) => rank + 1 + i).map(
      (r) => new Promise<void>((resolve) => waiting.set(r, { resolve })),
    ),
  );
  listener.take((socket: Socket, router: ReadRouter | null) => {
    const address = `${socket.remoteAddress}:${socket.remotePort}`;
    serverHandshake(socket, {
      secret,
      timeoutMs: handshakeTimeoutMs,
      accept(h: Hello) {
        if (h.purpose !== Purpose.Data) throw new AuthError(`${address}: not a data-plane connection`);
        if (h.groupId !== groupId) throw new AuthError(`${address}: connection for group ${JSON.stringify(h.groupId)}, this is ${JSON.stringify(groupId)}`);
        if (h.serverRank !== rank) throw new AuthError(`${address}: dialed rank ${h.serverRank}, this is rank ${rank}`);
        if (h.clientRank <= rank || h.clientRank >= size) throw new AuthError(`${address}: rank ${h.clientRank} must not dial rank ${rank}`);
        if (!waiting.has(h.clientRank)) throw new AuthError(`${address}: rank ${h.clientRank} is already connected`);
        if (h.flags !== flagsFor(encrypt)) throw new AuthError(`${address}: encryption settings differ`);
      },
    }).then(
      (hs) => {
        const w = waiting.get(hs.hello.clientRank);
        if (!w || abort.signal.aborted) {
          socket.destroy();
          return;
        }
        waiting.delete(hs.hello.clientRank);
        conns[hs.hello.clientRank] = new PeerConnection(socket, hs.leftover, { ...connOptions, peer: { rank: hs.hello.clientRank, address }, keys: keysFor(hs, false), router: router ?? undefined });
        w.resolve();
      },
      () => {
        /* serverHandshake destroyed the socket; a stranger never reaches the group */
      },
    );
  });

  // We dial lower ranks.
  const deadline = performance.now() + connectTimeoutMs;
  const dialed = Promise.all(
    Array.from({ length: rank }, (_, r) => r).map(async (r) => {
      const { socket, address, router } = await dial(r, peers[r].addresses, deadline, abort.signal);
      const hs = await clientHandshake(socket, {
        secret,
        groupId,
        purpose: Purpose.Data,
        clientRank: rank,
        serverRank: r,
        flags: flagsFor(encrypt),
        timeoutMs: handshakeTimeoutMs,
        signal: abort.signal,
      }).catch((err) => {
        throw err instanceof AuthError ? new AuthError(`rank ${r} (${address}): ${err.message}`, { cause: err }) : err;
      });
      conns[r] = new PeerConnection(socket, hs.leftover, { ...connOptions, peer: { rank: r, address }, keys: keysFor(hs, true), router });
    }),
  );

  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const missing = [...waiting.keys(), ...conns.map((c, r) => (c || r >= rank ? -1 : r)).filter((r) => r >= 0)];
      reject(
        new ConnectError(
          { rank: missing[0], address: peers[missing[0]]?.addresses.map((a) => `${a.host}:${a.port}`).join(',') },
          `mesh incomplete after ${connectTimeoutMs} ms (missing rank${missing.length > 1 ? 's' : ''} ${missing.sort().join(', ')})`,
        ),
      );
    }, connectTimeoutMs + 50);
  });
  try {
    await Promise.race([Promise.all([accepted, dialed]), timedOut, abortPromise(abort.signal)]);
  } catch (err) {
    abort.abort(err);
    for (const c of conns) c?.fail(new GroupClosedError('group creation failed'));
    await listener.close();
    throw err;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onOuterAbort);
  }
  await listener.close();
  return groupOverExchange(new TcpExchange(rank, conns), options);
}

function abortPromise(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/** Tries each address in turn, retrying refused connections until the deadline (peers start at different times). */
async function dial(rank: number, addresses: TcpAddress[], deadline: number, signal: AbortSignal): Promise<{ socket: Socket; address: string; router: ReadRouter }> {
  let delay = 20;
  let lastError = 'no address';
  while (performance.now() < deadline) {
    for (const a of addresses) {
      signal.throwIfAborted();
      const address = `${a.host}:${a.port}`;
      try {
        const router = new ReadRouter();
        const socket = await new Promise<Socket>((resolve, reject) => {
          const s = router.connect({ host: a.host, port: a.port, noDelay: true });
          const t = setTimeout(() => {
            s.destroy();
            reject(new Error('connect timed out'));
          }, Math.max(50, Math.min(2000, deadline - performance.now())));
          s.once('connect', () => {
            clearTimeout(t);
            s.removeAllListeners('error');
            resolve(s);
          });
          s.once('error', (err) => {
            clearTimeout(t);
            s.destroy();
            reject(err);
          });
        });
        socket.on('error', () => {});
        return { socket, address, router };
      } catch (err) {
        lastError = `${address}: ${(err as Error).message}`;
      }
    }
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(500, delay * 2);
  }
  throw new ConnectError({ rank, address: addresses.map((a) => `${a.host}:${a.port}`).join(',') }, lastError);
}

class TcpExchange implements Exchange {
  readonly size: number;
  constructor(
    readonly rank: number,
    private readonly conns: (PeerConnection | null)[],
  ) {
    this.size = conns.length;
  }

  send(peer: number, tag: number, bytes: Uint8Array, o: ExchangeOpOptions): Promise<void> {
    return this.#conn(peer).send(tag, bytes, o);
  }

  recv(peer: number, tag: number, into: Uint8Array, o: ExchangeOpOptions): Promise<void> {
    return this.#conn(peer).recv(tag, into, o);
  }

  async close(reason?: Error): Promise<void> {
    for (const c of this.conns) c?.fail(reason ?? new GroupClosedError('group closed'));
  }

  #conn(peer: number): PeerConnection {
    const c = this.conns[peer];
    if (!c) throw new UsageError(`no connection to ${describePeer({ rank: peer })}`);
    return c;
  }
}
