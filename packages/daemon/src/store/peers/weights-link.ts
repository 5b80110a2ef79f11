/**
 * One link to a peer's weights server: an authenticated stream over one path (one cable, one
 * interface), sealed unless both ends see a direct cable, with any number of chunk requests in
 * flight, answered in any order.
 */
import type { Duplex } from 'node:stream';
import { connectAuthenticated, type CipherName, type StreamEncryption } from '@orchard/transport';
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
  /** Whether this end wants the link encrypted (the server may ask too). @default never */
  encryption?: StreamEncryption;
}

export class WeightsLink {
  /** `host:port` of the server. */
  readonly address: string;
  /** This end's address: links from the same local address share a path. */
  readonly localAddress: string;
  /** The cipher sealing the link, or null when it is plain. */
  readonly cipher: CipherName | null;
  readonly #stream: Duplex;
  readonly #pending = new Map<number, { resolve: (a: ChunkAnswer) => void; reject: (e: Error) => void; what: string }>();
  readonly #idleMs: number;
  #nextId = 1;
  #closed: Error | undefined;
  #timer: NodeJS.Timeout | undefined;
  #lastActivity = 0;

  private constructor(stream: Duplex, localAddress: string, cipher: CipherName | null, address: string, idleMs: number) {
    this.#stream = stream;
    this.address = address;
    this.localAddress = localAddress;
    this.cipher = cipher;
    this.#idleMs = idleMs;
  }

  static async connect(o: WeightsLinkOptions): Promise<WeightsLink> {
    const address = `${o.host}:${o.port}`;
    const { socket, stream, cipher } = await connectAuthenticated({
      host: o.host,
      port: o.port,
      secret: o.secret,
      protocol: WEIGHTS_PROTOCOL,
      timeoutMs: o.connectTimeoutMs ?? 5000,
      signal: o.signal,
      encryption: o.encryption,
    });
    const link = new WeightsLink(stream, socket.localAddress ?? '', cipher, address, o.idleMs ?? 30_000);
    link.#attach();
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
      this.#stream.write(encodeRequest({ ...r, id }));
      this.#arm();
    });
  }

  close(reason = 'closed'): void {
    this.#fail(new LinkError(`link to ${this.address}: ${reason}`));
  }

  #attach(): void {
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
    this.#stream.on('data', onData);
    this.#stream.on('error', (err) => this.#fail(new LinkError(`link to ${this.address}: ${err.message}`)));
    this.#stream.on('close', () => this.#fail(new LinkError(`link to ${this.address}: closed by the peer`)));
    this.#stream.resume();
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
    this.#stream.destroy();
    for (const p of this.#pending.values()) p.reject(err);
    this.#pending.clear();
  }
}
