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
import { Purpose, helloFlags, secretBytes, type Hello } from '../wire/handshake.js';
import { proposedCipher, type CipherName } from '../wire/aead.js';
import { PeerConnection, type ConnectionKeys } from './connection.js';
import { clientHandshake, directionKeys, serverHandshake, socketEnds, type HandshakeResult, type SocketEnds } from './handshake-io.js';
import { ReadRouter } from './read-router.js';
import { listenTcp, type TcpAddress, type TcpListener, type TcpListenerInternal } from './listener.js';

export interface TcpPeer {
  /** Addresses to try in order (one per cable or interface). */
  addresses: TcpAddress[];
}

/** The two ends of one connection, as this rank sees them. */
export interface LinkEnds extends SocketEnds {
  /** The other rank. */
  peer: number;
}

/**
 * Which connections this rank wants encrypted. A connection is encrypted when either end wants
 * it (negotiated in the handshake), with the cipher the dialing end proposes.
 */
export interface EncryptionPolicy {
  /** Whether this end wants this connection encrypted. */
  wants(link: LinkEnds): boolean;
  /** Cipher proposed on connections this rank dials; 'auto' = the faster one here. @default 'auto' */
  cipher?: CipherName | 'auto';
}

/** A TCP group, with what each link turned out to be. */
export interface TcpGroup extends Group {
  /** Per peer rank: the cipher protecting its connection, or null for plain (and for this rank). */
  readonly encryption: readonly (CipherName | null)[];
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
  /**
   * Which connections to encrypt: false (this end asks for none; a peer may still ask), a cipher
   * (every connection, proposing that cipher), or a per-connection policy. @default false
   */
  encrypt?: false | CipherName | EncryptionPolicy;
  /** Time to reach every peer, ms. @default 10000 */
  connectTimeoutMs?: number;
  /** Deadline for one handshake, ms. @default 3000 */
  handshakeTimeoutMs?: number;
  /** Early frames kept per connection before the socket is paused, bytes. @default 256 MiB */
  maxUnexpectedBytes?: number;
  signal?: AbortSignal;
}

function policyOf(encrypt: false | CipherName | EncryptionPolicy): Required<EncryptionPolicy> {
  if (encrypt === false) return { wants: () => false, cipher: 'aes-256-gcm' };
  if (typeof encrypt === 'string') return { wants: () => true, cipher: encrypt };
  return { wants: (l) => encrypt.wants(l), cipher: encrypt.cipher ?? 'auto' };
}

function endsOf(socket: Socket, peer: number): LinkEnds {
  return { peer, ...socketEnds(socket) };
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
  const e = o.encrypt;
  if (e !== undefined && e !== false && e !== 'aes-256-gcm' && e !== 'chacha20-poly1305' && typeof (e as EncryptionPolicy).wants !== 'function') {
    throw new UsageError(`createTcpGroup: encrypt must be false, 'aes-256-gcm', 'chacha20-poly1305' or a policy, got ${String(e)}`);
  }
}

/** Connects to every peer and returns the group once the mesh is complete. */
export async function createTcpGroup(options: TcpGroupOptions): Promise<TcpGroup> {
  validate(options);
  const { rank, peers, groupId } = options;
  const size = peers.length;
  const secret = secretBytes(options.secret);
  const policy = policyOf(options.encrypt ?? false);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  const handshakeTimeoutMs = options.handshakeTimeoutMs ?? 3000;
  const connOptions = {
    maxUnexpectedBytes: options.maxUnexpectedBytes ?? 256 * 1024 * 1024,
    watchdogMs: Math.max(5, Math.min(100, timeoutMs / 5)),
  };
  const conns: (PeerConnection | null)[] = new Array(size).fill(null);
  const encryption: (CipherName | null)[] = new Array(size).fill(null);
  const keysFor = (hs: HandshakeResult, peer: number, asClient: boolean): ConnectionKeys | null => {
    encryption[peer] = hs.encryption?.cipher ?? null;
    return directionKeys(hs, asClient);
  };
  const tcpGroup = (): TcpGroup => Object.assign(groupOverExchange(new TcpExchange(rank, conns), options), { encryption });

  if (size === 1) {
    await options.listener?.close();
    return tcpGroup();
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
      },
      wantsEncryption: (h: Hello) => policy.wants(endsOf(socket, h.clientRank)),
    }).then(
      (hs) => {
        const w = waiting.get(hs.hello.clientRank);
        if (!w || abort.signal.aborted) {
          socket.destroy();
          return;
        }
        waiting.delete(hs.hello.clientRank);
        const peer = hs.hello.clientRank;
        conns[peer] = new PeerConnection(socket, hs.leftover, { ...connOptions, peer: { rank: peer, address }, keys: keysFor(hs, peer, false), router: router ?? undefined });
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
        flags: helloFlags(policy.wants(endsOf(socket, r)), proposedCipher(policy.cipher)),
        timeoutMs: handshakeTimeoutMs,
        signal: abort.signal,
      }).catch((err) => {
        throw err instanceof AuthError ? new AuthError(`rank ${r} (${address}): ${err.message}`, { cause: err }) : err;
      });
      conns[r] = new PeerConnection(socket, hs.leftover, { ...connOptions, peer: { rank: r, address }, keys: keysFor(hs, r, true), router });
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
  return tcpGroup();
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
