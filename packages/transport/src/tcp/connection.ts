/**
 * One authenticated TCP connection to one peer: frames out, frames in, receives matched by tag in
 * FIFO order, payloads copied straight from socket chunks into the posted receive buffer.
 *
 * Back-pressure: a send resolves only when the socket has handed its bytes to the kernel. A frame
 * that arrives before its receive is posted is kept (up to `maxUnexpectedBytes`); beyond that the
 * socket is paused until a receive is posted, so a fast sender cannot exhaust our memory.
 *
 * Failure: socket error/close, garbage, or no progress for an operation's timeout fails the
 * connection: every pending operation rejects with an error naming the peer, the socket is destroyed.
 */
import type { Socket } from 'node:net';
import { FrameError, PeerClosedError, PeerTimeoutError, TransportError, UsageError, describePeer, type PeerRef } from '../errors.js';
import type { ExchangeOpOptions } from '../collectives/exchange.js';
import { AEAD_PIECE_BYTES, AEAD_TAG_BYTES, FrameOpener, FrameSealer, type CipherName, type OpenStream, type SealStream } from '../wire/aead.js';
import type { ReadRouter } from './read-router.js';
import { SendSlab } from './send-slab.js';
import { FRAME_HEADER_BYTES, FrameDecoder, KIND_DATA, encodeHeader, type FrameHeader } from '../wire/frame.js';

export interface ConnectionKeys {
  cipher: CipherName;
  sendKey: Buffer;
  recvKey: Buffer;
}

export interface ConnectionOptions {
  peer: PeerRef;
  keys: ConnectionKeys | null;
  /** Bytes of early frames kept while no receive is posted. */
  maxUnexpectedBytes: number;
  /** How often stalls are checked, ms. */
  watchdogMs: number;
  /** Present for sockets we dialed: reads go straight into receive buffers. */
  router?: ReadRouter;
}

/** Below this many payload bytes left, a read goes to staging and is copied (not worth a syscall per piece). */
const MIN_DIRECT_READ = 16 * 1024;

interface PendingRecv {
  into: Uint8Array;
  resolve: () => void;
  reject: (err: unknown) => void;
  postedAt: number;
  timeoutMs: number;
  started: boolean;
  signal?: AbortSignal;
  onAbort?: () => void;
}

interface PendingSend {
  resolve: () => void;
  reject: (err: unknown) => void;
  at: number;
  timeoutMs: number;
  signal?: AbortSignal;
  onAbort?: () => void;
}

/** An encrypted frame waiting for (or part-way through) its turn on the socket. */
interface SealedFrame {
  tag: number;
  bytes: Uint8Array;
  entry: PendingSend;
  /** Payload bytes sealed and written so far. */
  offset: number;
  stream: SealStream | null;
}

const RESOLVED = Promise.resolve();

/**
 * An encrypted frame is sealed only this far ahead of the socket (one piece waiting while the
 * kernel holds the previous ones): beyond it the sender waits for the kernel to take bytes, so
 * encryption overlaps the transfer (and the receiver's decryption) instead of preceding it, and
 * ciphertext waiting in memory stays small.
 */
const SEAL_AHEAD_BYTES = AEAD_PIECE_BYTES;

/** Header slots written in order and reused once their write completed. */
const HEADER_RING = 512;
/** Payloads up to this size are copied next to their header and sent with one write. */
const SMALL_FRAME_MAX = 32 * 1024;
/** Ring for small frames: room for many in-flight small messages per connection. */
const SLAB_BYTES = 1024 * 1024;
/**
 * Early frames up to this size are received into pooled buffers: in back-to-back collectives the
 * peer's next message routinely arrives (in the same read as its previous one) before its
 * receive is posted, and a fresh buffer per message was the hot path's one allocation.
 */
const EARLY_POOL_MAX_BYTES = 64 * 1024;
/** Pooled buffers kept per size. */
const EARLY_POOL_DEPTH = 4;

export class PeerConnection {
  readonly peer: PeerRef;
  readonly #socket: Socket;
  readonly #decoder: FrameDecoder;
  readonly #sealer: FrameSealer | null;
  readonly #opener: FrameOpener | null;
  readonly #maxUnexpected: number;
  readonly #posted = new Map<number, PendingRecv[]>();
  readonly #unexpected = new Map<number, Uint8Array[]>();
  readonly #earlyPool = new Map<number, Uint8Array[]>();
  #unexpectedBytes = 0;
  readonly #sends = new Set<PendingSend>();
  readonly #headers = new Uint8Array(HEADER_RING * FRAME_HEADER_BYTES);
  #headerNext = 0;
  #headersInFlight = 0;
  #txSeq = 0;
  #current: PendingRecv | null = null;
  /** Decryption of the frame arriving now (encrypted connections). */
  #opening: OpenStream | null = null;
  /** Encrypted frames in send order; the first may be part-way out. */
  readonly #sealQueue: SealedFrame[] = [];
  #drainWaiting = false;
  #stash: Buffer | null = null;
  #lastRx = performance.now();
  #lastTx = performance.now();
  /** libuv write queue size at the last watchdog check. */
  #lastQueued = -1;
  #error: Error | null = null;
  readonly #watchdog: NodeJS.Timeout;
  readonly #aad = new Uint8Array(FRAME_HEADER_BYTES);
  readonly #slab = new SendSlab(SLAB_BYTES);
  /**
   * One callback for every small write: slots are released in write order, so nothing needs to
   * be captured per send (and Node batches consecutive completions of the same callback).
   */
  readonly #smallWritten = (err?: Error | null): void => {
    this.#slab.release();
    this.#lastTx = performance.now();
    if (err) this.fail(new PeerClosedError(this.peer, err.message, { cause: err }));
  };

  constructor(socket: Socket, leftover: Buffer, options: ConnectionOptions) {
    this.peer = options.peer;
    this.#socket = socket;
    this.#maxUnexpected = options.maxUnexpectedBytes;
    this.#sealer = options.keys ? new FrameSealer(options.keys.cipher, options.keys.sendKey) : null;
    this.#opener = options.keys ? new FrameOpener(options.keys.cipher, options.keys.recvKey) : null;
    this.#decoder = new FrameDecoder(
      {
        target: (h) => this.#target(h),
        complete: (h, t, tr) => this.#complete(h, t, tr),
        progress: this.#opener ? (_h, t, start, end) => this.#opening!.update(t.subarray(start, end)) : undefined,
      },
      { trailerBytes: options.keys ? AEAD_TAG_BYTES : 0 },
    );
    socket.setNoDelay(true);
    if (options.router) {
      options.router.attach({
        window: () => (this.#stash || this.#error ? null : this.#decoder.payloadWindow(MIN_DIRECT_READ)),
        onRead: (buf, n) => this.#onRead(buf, n),
      });
    } else {
      socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    }
    socket.on('error', (err) => this.fail(new PeerClosedError(this.peer, err.message, { cause: err })));
    socket.on('end', () => this.fail(new PeerClosedError(this.peer, 'peer closed the connection')));
    socket.on('close', () => this.fail(new PeerClosedError(this.peer, 'connection closed')));
    this.#watchdog = setInterval(() => this.#checkStalls(), options.watchdogMs);
    this.#watchdog.unref();
    if (leftover.length) this.#onData(leftover);
    socket.resume();
  }

  get error(): Error | null {
    return this.#error;
  }

  send(tag: number, bytes: Uint8Array, o: ExchangeOpOptions): Promise<void> {
    if (this.#error) return Promise.reject(this.#error);
    if (o.signal?.aborted) return Promise.reject(o.signal.reason);
    if (bytes.length > 0xffffffff) return Promise.reject(new UsageError(`message of ${bytes.length} bytes exceeds 4 GiB - 1`));
    if (this.#sealer) return this.#sendSealed(tag, bytes, o);
    const seq = this.#nextSeq();
    if (seq < 0) return Promise.reject(this.#error);
    // Small frame: header and payload copied into one slot of the send ring, one write.
    const slot = bytes.length > SMALL_FRAME_MAX ? null : this.#slab.reserve(FRAME_HEADER_BYTES + bytes.length);
    if (slot) {
      encodeHeader(slot, 0, KIND_DATA, tag, seq, bytes.length);
      slot.set(bytes, FRAME_HEADER_BYTES);
      // The bytes now live in the ring, so the caller's buffer is free at once: resolve without
      // waiting for the write callback. Back-pressure still holds: when the ring is full, sends
      // take the path below and wait for the kernel. A failed write fails the connection.
      this.#socket.write(slot, this.#smallWritten);
      return RESOLVED;
    }
    let header: Uint8Array;
    if (this.#headersInFlight < HEADER_RING) {
      header = this.#headers.subarray(this.#headerNext * FRAME_HEADER_BYTES, (this.#headerNext + 1) * FRAME_HEADER_BYTES);
      this.#headerNext = (this.#headerNext + 1) % HEADER_RING;
      this.#headersInFlight++;
    } else {
      header = new Uint8Array(FRAME_HEADER_BYTES); // more than HEADER_RING frames queued: rare
      this.#headersInFlight++;
    }
    encodeHeader(header, 0, KIND_DATA, tag, seq, bytes.length);
    return new Promise<void>((resolve, reject) => {
      const entry: PendingSend = { resolve, reject, at: performance.now(), timeoutMs: o.timeoutMs };
      this.#sends.add(entry);
      if (o.signal) this.#watchAbort(entry, o.signal);
      const done = (err?: Error | null) => {
        this.#headersInFlight--;
        this.#sent(entry, err);
      };
      const s = this.#socket;
      s.cork();
      if (bytes.length) {
        s.write(header);
        s.write(bytes, done);
      } else {
        s.write(header, done);
      }
      s.uncork();
    });
  }

  /** The next frame sequence number, or -1 (and the connection failed) when they ran out. */
  #nextSeq(): number {
    if (this.#txSeq === 0xffffffff) {
      this.fail(new TransportError(`connection to ${describePeer(this.peer)} exhausted its frame sequence; reconnect`));
      return -1;
    }
    return this.#txSeq++;
  }

  /**
   * Encrypted send. A small frame with nothing queued ahead of it is sealed into the send ring and
   * resolves at once, like a plain one; anything else joins the queue, which seals and writes
   * frames in order, piece by piece, never more than SEAL_AHEAD_BYTES ahead of the socket.
   */
  #sendSealed(tag: number, bytes: Uint8Array, o: ExchangeOpOptions): Promise<void> {
    if (this.#sealQueue.length === 0 && bytes.length <= SMALL_FRAME_MAX) {
      const slot = this.#slab.reserve(FRAME_HEADER_BYTES + bytes.length + AEAD_TAG_BYTES);
      if (slot) {
        const seq = this.#nextSeq();
        if (seq < 0) return Promise.reject(this.#error);
        const header = slot.subarray(0, FRAME_HEADER_BYTES);
        encodeHeader(header, 0, KIND_DATA, tag, seq, bytes.length);
        const [ct, tagBytes] = this.#sealer!.seal(seq, header, bytes);
        slot.set(ct, FRAME_HEADER_BYTES);
        slot.set(tagBytes, FRAME_HEADER_BYTES + bytes.length);
        this.#socket.write(slot, this.#smallWritten);
        return RESOLVED;
      }
    }
    return new Promise<void>((resolve, reject) => {
      const entry: PendingSend = { resolve, reject, at: performance.now(), timeoutMs: o.timeoutMs };
      this.#sends.add(entry);
      if (o.signal) this.#watchAbort(entry, o.signal);
      this.#sealQueue.push({ tag, bytes, entry, offset: 0, stream: null });
      if (this.#sealQueue.length === 1) this.#pumpSealed();
    });
  }

  /** Seals and writes queued frames until the queue is empty or the socket is SEAL_AHEAD_BYTES behind. */
  #pumpSealed(): void {
    const s = this.#socket;
    while (this.#sealQueue.length > 0 && !this.#error) {
      const f = this.#sealQueue[0];
      if (!f.stream) {
        const seq = this.#nextSeq();
        if (seq < 0) return;
        const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
        encodeHeader(header, 0, KIND_DATA, f.tag, seq, f.bytes.length);
        f.stream = this.#sealer!.begin(seq, header, f.bytes.length);
        s.write(header);
      }
      while (f.offset < f.bytes.length) {
        if (s.writableLength >= SEAL_AHEAD_BYTES) {
          // Every write here exceeds the stream's high-water mark, so 'drain' follows when the
          // kernel has taken what is queued.
          if (!this.#drainWaiting) {
            this.#drainWaiting = true;
            s.once('drain', () => {
              this.#drainWaiting = false;
              this.#lastTx = performance.now();
              this.#pumpSealed();
            });
          }
          return;
        }
        const end = Math.min(f.bytes.length, f.offset + AEAD_PIECE_BYTES);
        s.write(f.stream.update(f.bytes.subarray(f.offset, end)));
        f.offset = end;
      }
      this.#sealQueue.shift();
      s.write(f.stream.final(), (err) => this.#sent(f.entry, err));
    }
  }

  #watchAbort(entry: PendingSend, signal: AbortSignal): void {
    entry.signal = signal;
    entry.onAbort = () => {
      // Bytes already queued cannot be recalled: the stream is out of step, so the link fails.
      this.#sends.delete(entry);
      entry.reject(signal.reason);
      this.fail(new PeerClosedError(this.peer, 'a send was aborted mid-transfer'));
    };
    signal.addEventListener('abort', entry.onAbort, { once: true });
  }

  /** A write finished (or failed). */
  #sent(entry: PendingSend, err: Error | null | undefined): void {
    this.#lastTx = performance.now();
    if (!this.#sends.delete(entry)) return;
    if (entry.onAbort) entry.signal?.removeEventListener('abort', entry.onAbort);
    if (err) {
      const e = new PeerClosedError(this.peer, err.message, { cause: err });
      entry.reject(e);
      this.fail(e);
    } else entry.resolve();
  }

  recv(tag: number, into: Uint8Array, o: ExchangeOpOptions): Promise<void> {
    if (this.#error) return Promise.reject(this.#error);
    if (o.signal?.aborted) return Promise.reject(o.signal.reason);
    const early = this.#unexpected.get(tag);
    if (early?.length && !this.#posted.get(tag)?.length) {
      const data = early.shift()!;
      if (early.length === 0) this.#unexpected.delete(tag);
      this.#unexpectedBytes -= data.length;
      if (data.length !== into.length) {
        const err = this.#sizeMismatch(tag, data.length, into.length);
        this.fail(err);
        return Promise.reject(err);
      }
      into.set(data);
      this.#recycle(data);
      if (this.#decoder.paused) this.#tryResume();
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const p: PendingRecv = { into, resolve, reject, postedAt: performance.now(), timeoutMs: o.timeoutMs, started: false };
      if (o.signal) {
        p.signal = o.signal;
        p.onAbort = () => {
          if (p.started) {
            reject(o.signal!.reason);
            this.fail(new PeerClosedError(this.peer, 'a receive was aborted mid-transfer'));
            return;
          }
          const q = this.#posted.get(tag);
          const i = q?.indexOf(p) ?? -1;
          if (q && i >= 0) q.splice(i, 1);
          reject(o.signal!.reason);
        };
        o.signal.addEventListener('abort', p.onAbort, { once: true });
      }
      let q = this.#posted.get(tag);
      if (!q) this.#posted.set(tag, (q = []));
      q.push(p);
      // The frame for this receive may already be arriving into an early buffer: take it over, so
      // the rest of it lands in the caller's buffer directly.
      if (q.length === 1 && this.#current === null && this.#decoder.payloadTag === tag) {
        try {
          this.#decoder.redirect(into);
        } catch (e) {
          const err = new FrameError(`${describePeer(this.peer)}: ${(e as Error).message}`);
          reject(err);
          this.fail(err);
          return;
        }
        p.started = true;
        this.#current = p;
      }
      if (this.#decoder.paused) this.#tryResume();
    });
  }

  /** Fails the connection: all pending operations reject with `err`; idempotent. */
  fail(err: Error): void {
    if (this.#error) return;
    this.#error = err;
    clearInterval(this.#watchdog);
    this.#socket.destroy();
    for (const q of this.#posted.values()) for (const p of q) this.#settleRecv(p, err);
    this.#posted.clear();
    for (const s of this.#sends) {
      if (s.onAbort) s.signal?.removeEventListener('abort', s.onAbort);
      s.reject(err);
    }
    this.#sends.clear();
    this.#sealQueue.length = 0;
    this.#opening = null;
    this.#unexpected.clear();
    this.#unexpectedBytes = 0;
    this.#stash = null;
  }

  #settleRecv(p: PendingRecv, err?: unknown): void {
    if (p.onAbort) p.signal?.removeEventListener('abort', p.onAbort);
    if (err) p.reject(err);
    else p.resolve();
  }

  #sizeMismatch(tag: number, sent: number, expected: number): FrameError {
    return new FrameError(`${describePeer(this.peer)} sent a ${sent}-byte message (tag 0x${tag.toString(16)}) but the receive expects ${expected} bytes`);
  }

  /** A read from a dialed socket: in place when it landed in the payload window, else copied. */
  #onRead(buf: Uint8Array, n: number): void {
    if (this.#error || n <= 0) return;
    if (!this.#stash && this.#decoder.isWindow(buf)) {
      this.#lastRx = performance.now();
      try {
        this.#decoder.advanceInPlace(n);
      } catch (err) {
        this.fail(new PeerClosedError(this.peer, `protocol error: ${(err as Error).message}`, { cause: err }));
      }
      return;
    }
    // Staging is reused by the next read: the decoder copies what it takes, the rest is stashed.
    this.#onData(buf, n);
  }

  /** The first `n` bytes of `chunk` arrived. */
  #onData(chunk: Uint8Array, n = chunk.length): void {
    this.#lastRx = performance.now();
    if (this.#stash) {
      this.#stash = Buffer.concat([this.#stash, chunk.subarray(0, n)]); // copies, so staging reuse is safe
      return;
    }
    this.#feed(chunk, n);
  }

  #feed(chunk: Uint8Array, n = chunk.length): void {
    try {
      const used = this.#decoder.push(chunk, n);
      if (used < n && !this.#error) {
        this.#stash = Buffer.from(chunk.subarray(used, n)); // copy: the chunk may be reused staging
        this.#socket.pause();
      }
    } catch (err) {
      this.fail(err instanceof TransportError ? new PeerClosedError(this.peer, `protocol error: ${(err as Error).message}`, { cause: err }) : (err as Error));
    }
  }

  #tryResume(): void {
    try {
      if (!this.#decoder.resume()) return;
    } catch (err) {
      this.fail(new PeerClosedError(this.peer, `protocol error: ${(err as Error).message}`, { cause: err }));
      return;
    }
    const rest = this.#stash;
    this.#stash = null;
    if (rest) this.#feed(rest);
    if (!this.#stash && !this.#error) this.#socket.resume();
  }

  #target(h: FrameHeader): Uint8Array | null {
    const target = this.#targetFor(h);
    if (target && this.#opener) {
      encodeHeader(this.#aad, 0, h.kind, h.tag, h.seq, h.length);
      this.#opening = this.#opener.begin(h.seq, this.#aad, h.length);
    }
    return target;
  }

  #targetFor(h: FrameHeader): Uint8Array | null {
    const q = this.#posted.get(h.tag);
    if (q?.length) {
      const p = q[0];
      if (p.into.length !== h.length) throw this.#sizeMismatch(h.tag, h.length, p.into.length);
      p.started = true;
      this.#current = p;
      return p.into;
    }
    if (this.#unexpectedBytes + h.length > this.#maxUnexpected && this.#unexpectedBytes > 0) return null;
    this.#current = null;
    return (h.length <= EARLY_POOL_MAX_BYTES ? this.#earlyPool.get(h.length)?.pop() : undefined) ?? Buffer.allocUnsafeSlow(h.length);
  }

  /** An early frame's buffer was copied out: keep it for the next one of its size. */
  #recycle(buf: Uint8Array): void {
    if (buf.length > EARLY_POOL_MAX_BYTES) return;
    let free = this.#earlyPool.get(buf.length);
    if (!free) this.#earlyPool.set(buf.length, (free = []));
    if (free.length < EARLY_POOL_DEPTH) free.push(buf);
  }

  #complete(h: FrameHeader, target: Uint8Array, trailer: Uint8Array): void {
    if (this.#opening) {
      // The payload is already decrypted (as it arrived); the tag decides whether it stands.
      const opening = this.#opening;
      this.#opening = null;
      opening.final(trailer);
    }
    const p = this.#current;
    this.#current = null;
    if (p) {
      const q = this.#posted.get(h.tag)!;
      q.shift();
      if (q.length === 0) this.#posted.delete(h.tag);
      this.#settleRecv(p);
      return;
    }
    // A receive may have been posted while this early frame was still arriving: it comes first.
    const waiting = this.#posted.get(h.tag);
    if (waiting?.length) {
      const w = waiting.shift()!;
      if (waiting.length === 0) this.#posted.delete(h.tag);
      if (w.into.length !== target.length) throw this.#sizeMismatch(h.tag, target.length, w.into.length);
      w.into.set(target);
      this.#recycle(target);
      this.#settleRecv(w);
      return;
    }
    let early = this.#unexpected.get(h.tag);
    if (!early) this.#unexpected.set(h.tag, (early = []));
    early.push(target);
    this.#unexpectedBytes += target.length;
  }

  #checkStalls(): void {
    const now = performance.now();
    for (const q of this.#posted.values()) {
      for (const p of q) {
        if (now - Math.max(p.postedAt, this.#lastRx) > p.timeoutMs) {
          this.fail(new PeerTimeoutError(this.peer, p.timeoutMs, 'waiting for data from'));
          return;
        }
      }
    }
    if (this.#sends.size > 0) {
      // A large write completes (and calls back) only at its end; meanwhile the kernel taking bytes
      // from libuv's queue is the progress that tells a slow link from a dead peer.
      const queued = (this.#socket as unknown as { _handle?: { writeQueueSize?: number } })._handle?.writeQueueSize;
      if (queued !== undefined && queued !== this.#lastQueued) {
        this.#lastQueued = queued;
        this.#lastTx = now;
      }
    }
    for (const s of this.#sends) {
      if (now - Math.max(s.at, this.#lastTx) > s.timeoutMs) {
        this.fail(new PeerTimeoutError(this.peer, s.timeoutMs, 'sending to'));
        return;
      }
    }
  }
}
