/**
 * Zero-copy receive for sockets we dial: Node's `onread` lets the socket read into memory we
 * choose, so while a large payload is arriving its bytes land directly in the caller's receive
 * buffer (no per-read allocation, no second copy). Between payloads, reads go to one reusable
 * staging buffer. Node 20 cannot create accepted sockets with `onread`, so `adopt` moves an
 * accepted socket's libuv handle into a new Socket that has it: both ends of every link then read
 * the same way (without it the accepting rank paid an allocation and a copy per 64 KiB read, and
 * was the slowest link of every ring).
 *
 * Until a connection takes over (during the handshake) the router re-emits reads as 'data'
 * events, so handshake code works the same for both kinds of socket.
 */
import net, { type Socket } from 'node:net';

const STAGING_BYTES = 64 * 1024;

export interface ReadSink {
  /** Where the next read may land, or null for the staging buffer. */
  window(): Uint8Array | null;
  /** `n` bytes were read into `buf` (a window given earlier, or the staging buffer). */
  onRead(buf: Uint8Array, n: number): void;
}

export class ReadRouter {
  readonly #staging = new Uint8Array(STAGING_BYTES);
  #sink: ReadSink | null = null;
  #socket: Socket | null = null;

  /** Options for net.connect. */
  readonly onread = {
    buffer: (): Uint8Array => this.#sink?.window() ?? this.#staging,
    callback: (n: number, buf: Uint8Array): void => {
      if (this.#sink) this.#sink.onRead(buf, n);
      else this.#socket?.emit('data', Buffer.from(buf.subarray(0, n)));
    },
  };

  connect(options: net.NetConnectOpts): Socket {
    this.#socket = net.connect({ ...options, onread: this.onread } as net.NetConnectOpts);
    return this.#socket;
  }

  /**
   * Takes over a socket accepted by a net.Server that has not read yet (pauseOnConnect): returns a
   * Socket on the same connection reading through this router, or null where this Node keeps the
   * handle elsewhere (the caller then uses the accepted socket and 'data' events).
   */
  adopt(accepted: Socket): Socket | null {
    const internal = accepted as unknown as { _handle?: object | null };
    const handle = internal._handle;
    if (!handle || accepted.readableFlowing === true) return null;
    // The old Socket gives up the handle without closing it; destroying it then only releases
    // the server's connection count.
    internal._handle = null;
    accepted.destroy();
    this.#socket = new net.Socket({ handle, onread: this.onread, readable: true, writable: true, pauseOnCreate: true } as net.SocketConstructorOpts);
    return this.#socket;
  }

  attach(sink: ReadSink): void {
    this.#sink = sink;
  }
}
