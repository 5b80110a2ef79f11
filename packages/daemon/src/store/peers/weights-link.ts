/**
 * One link to a peer's weights server: an authenticated socket over one path (one cable, one
 * interface) with any number of chunk requests in flight, answered in any order.
 */
import type { Socket } from 'node:net';
import { connectAuthenticated } from '@orchard/transport';
import { StoreError } from '../errors.js';
import { AnswerDecoder, encodeRequest, Kind, WEIGHTS_PROTOCOL, type ChunkRequest } from './wire.js';

/** The peer answered that it does not have the chunk (or is still fetching it). */
export class ChunkMissingError extends StoreError {
  constructor(
    readonly reason: string,
    what: string,
  ) {
    super(`${what}: ${reason}`);
    this.name = 'ChunkMissingError';
  }
}

/** The link broke (closed, reset, silent too long, garbage): its requests fail with this. */
export class LinkError extends StoreError {
  constructor(message: string) {
    super(message);
    this.name = 'LinkError';
  }
}

export interface ChunkAnswer {
  bytes: Buffer;
  /** The digest the server recorded for the chunk (what its bytes should hash to). */
  digest: Buffer;
}

export interface WeightsLinkOptions {
  host: string;
  port: number;
  secret: Uint8Array;
  /** Connect + handshake deadline. @default 5000 */
  connectTimeoutMs?: number;
  /** With requests outstanding, this long without a byte breaks the link (above the server's wait). @default 30000 */
  idleMs?: number;
  signal?: AbortSignal;
}

export class WeightsLink {
  /** `host:port` of the server. */
  readonly address: string;
  /** This end's address: links from the same local address share a path. */
  readonly localAddress: string;
  readonly #socket: Socket;
  readonly #pending = new Map<number, { resolve: (a: ChunkAnswer) => void; reject: (e: Error) => void; what: string }>();
  readonly #idleMs: number;
  #nextId = 1;
  #closed: Error | undefined;
  #timer: NodeJS.Timeout | undefined;
  #lastActivity = 0;

  private constructor(socket: Socket, address: string, idleMs: number) {
    this.#socket = socket;
    this.address = address;
    this.localAddress = socket.localAddress ?? '';
    this.#idleMs = idleMs;
  }

  static async connect(o: WeightsLinkOptions): Promise<WeightsLink> {
    const address = `${o.host}:${o.port}`;
    const { socket, leftover } = await connectAuthenticated({
      host: o.host,
      port: o.port,
      secret: o.secret,
      protocol: WEIGHTS_PROTOCOL,
      timeoutMs: o.connectTimeoutMs ?? 5000,
      signal: o.signal,
    });
    const link = new WeightsLink(socket, address, o.idleMs ?? 30_000);
    link.#attach(leftover);
    return link;
  }

  get closed(): boolean {
    return this.#closed !== undefined;
  }

  get outstanding(): number {
    return this.#pending.size;
  }

  /** Requests a chunk; rejects with ChunkMissingError (the peer lacks it) or LinkError (the link broke). */
  get(r: Omit<ChunkRequest, 'id'>): Promise<ChunkAnswer> {
    if (this.#closed) return Promise.reject(this.#closed);
    const id = this.#nextId++ >>> 0;
    const what = `chunk ${r.chunk} of ${r.key.slice(0, 20)}… from ${this.address}`;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, what });
      this.#socket.write(encodeRequest({ ...r, id }));
      this.#arm();
    });
  }

  close(reason = 'closed'): void {
    this.#fail(new LinkError(`link to ${this.address}: ${reason}`));
  }

  #attach(leftover: Buffer): void {
    const decoder = new AnswerDecoder((h, body) => {
      const p = this.#pending.get(h.id);
      if (!p) return this.#fail(new LinkError(`link to ${this.address}: answer to unknown request ${h.id}`));
      this.#pending.delete(h.id);
      if (h.kind === Kind.Chunk) p.resolve({ bytes: body, digest: h.digest });
      else p.reject(new ChunkMissingError(body.toString('utf8') || 'not here', p.what));
    });
    const onData = (d: Buffer) => {
      this.#arm();
      try {
        decoder.push(d);
      } catch (err) {
        this.#fail(new LinkError(`link to ${this.address}: ${(err as Error).message}`));
      }
    };
    this.#socket.on('data', onData);
    this.#socket.on('error', (err) => this.#fail(new LinkError(`link to ${this.address}: ${err.message}`)));
    this.#socket.on('close', () => this.#fail(new LinkError(`link to ${this.address}: closed by the peer`)));
    if (leftover.length) onData(leftover);
    this.#socket.resume();
  }

  /** Notes activity; one timer per idle period checks it (not a new timer per socket read). */
  #arm(): void {
    this.#lastActivity = Date.now();
    if (this.#timer || this.#closed) return;
    const check = () => {
      this.#timer = undefined;
      if (!this.#pending.size || this.#closed) return;
      const quiet = Date.now() - this.#lastActivity;
      if (quiet >= this.#idleMs) return this.#fail(new LinkError(`link to ${this.address}: no data for ${this.#idleMs} ms`));
      this.#timer = setTimeout(check, this.#idleMs - quiet);
      this.#timer.unref();
    };
    this.#timer = setTimeout(check, this.#idleMs);
    this.#timer.unref();
  }

  #fail(err: Error): void {
    if (this.#closed) return;
    this.#closed = err;
    clearTimeout(this.#timer);
    this.#socket.destroy();
    for (const p of this.#pending.values()) p.reject(err);
    this.#pending.clear();
  }
}
