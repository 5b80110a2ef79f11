/**
 * `/orchard/infer/1`: a request goes whole to the node that drives the chosen instance, over the
 * libp2p connection (authenticated and encrypted, and in a private pod only between key holders).
 * Wire: one JSON line {instance, request} in; JSON lines of ServeEvent out; the stream closes after
 * `done` or `error`. Closing the stream from the caller's side cancels the request.
 */
import type { Stream } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { z } from 'zod';
import type { OrchardNode } from '../node/create-node.js';
import { ServeError } from '../requests/errors.js';
import { serveRequestSchema, type ServeEvent, type ServeRequest } from '../requests/request.js';

export const INFER_PROTOCOL = '/orchard/infer/1';
const MAX_REQUEST_BYTES = 4 * 1024 * 1024;
const STREAM_LIMITS = { maxInboundStreams: 512, maxOutboundStreams: 512 };

const inferRequestSchema = z.object({ instance: z.string().min(1).max(160), request: serveRequestSchema });

type Run = (instance: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal) => Promise<void>;

/** Splits a byte stream into JSON lines. */
async function* lines(stream: AsyncIterable<Uint8Array | { subarray(): Uint8Array }>, maxBytes: number): AsyncGenerator<string> {
  const dec = new TextDecoder();
  let buf = '';
  for await (const chunk of stream) {
    buf += dec.decode(chunk instanceof Uint8Array ? chunk : chunk.subarray(), { stream: true });
    if (buf.length > maxBytes) throw new Error(`line longer than ${maxBytes} bytes`);
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      yield buf.slice(0, i);
      buf = buf.slice(i + 1);
    }
  }
}

function sendLine(stream: Stream, value: unknown): void {
  stream.send(new TextEncoder().encode(JSON.stringify(value) + '\n'));
}

export async function serveInfer(node: OrchardNode, run: Run): Promise<void> {
  await node.handle(
    INFER_PROTOCOL,
    async (stream: Stream) => {
      const abort = new AbortController();
      stream.addEventListener('close', () => abort.abort(), { once: true });
      try {
        const it = lines(stream, MAX_REQUEST_BYTES);
        const first = await it.next();
        if (first.done) return;
        const parsed = inferRequestSchema.safeParse(JSON.parse(first.value));
        if (!parsed.success) throw new ServeError(400, 'invalid_request', `bad forwarded request: ${parsed.error.issues[0]?.message}`);
        // Keep reading so a close from the caller is seen (and cancels).
        void (async () => {
          try {
            for await (const _ of it) void _;
          } catch {
            /* closed */
          }
        })();
        // The caller may be gone between two tokens: a closed stream cancels the run instead of throwing.
        const emit = (e: ServeEvent) => {
          if (stream.writeStatus !== 'writable') return abort.abort();
          try {
            sendLine(stream, e);
          } catch {
            abort.abort();
          }
        };
        await run(parsed.data.instance, parsed.data.request, emit, abort.signal);
      } catch (err) {
        const e = err instanceof ServeError ? err : new ServeError(500, 'internal_error', (err as Error).message);
        try {
          sendLine(stream, { type: 'error', status: e.status, code: e.code, message: e.message } satisfies ServeEvent);
        } catch {
          /* stream gone */
        }
      } finally {
        await stream.close().catch(() => stream.abort(new Error('close failed')));
      }
    },
    { ...STREAM_LIMITS, runOnLimitedConnection: false },
  );
}

/** Runs `req` on `instance` driven by `peer`; events arrive through `emit`. Rejects with ServeError. */
export async function callRemote(node: OrchardNode, peer: string, instance: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal): Promise<void> {
  let stream: Stream;
  try {
    stream = await node.dialProtocol(peerIdFromString(peer), INFER_PROTOCOL, { signal: AbortSignal.any([signal, AbortSignal.timeout(5000)]), ...STREAM_LIMITS });
  } catch (err) {
    throw new ServeError(503, 'instance_unreachable', `cannot reach node ${peer} driving the instance: ${(err as Error).message}`);
  }
  const onAbort = () => stream.abort(new Error('client went away'));
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    sendLine(stream, { instance, request: req });
    let finished = false;
    for await (const line of lines(stream, MAX_REQUEST_BYTES)) {
      if (!line) continue;
      const e = JSON.parse(line) as ServeEvent;
      if (e.type === 'error') throw new ServeError(e.status, e.code, e.message);
      emit(e);
      if (e.type === 'done') {
        finished = true;
        break;
      }
    }
    if (!finished && !signal.aborted) throw new ServeError(503, 'instance_failed', `node ${peer} closed the stream before the answer was complete`);
  } catch (err) {
    if (err instanceof ServeError) throw err;
    throw new ServeError(503, 'instance_failed', `lost node ${peer} during the request: ${(err as Error).message}`);
  } finally {
    signal.removeEventListener('abort', onAbort);
    await stream.close().catch(() => undefined);
  }
}
