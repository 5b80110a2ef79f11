/** Shared by the dialect route files (openai.ts, anthropic.ts, ollama.ts, responses.ts): running a request, errors, client aborts, tokenizers. */
import { loadTokenizer, type ModelTokenizer } from '@orchard/engine';
import type { FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import type { Serving } from '../serving/serving.js';
import { ServeError, DialectError } from '../requests/errors.js';
import type { ServeEvent, ServeRequest } from '../requests/request.js';
import { ModelFilesError } from '../models/load-check.js';
import { logRequests, type RunRequest } from '../request-log.js';
import { errorHeaders } from './errors.js';

/** Runs a request on the pod (the router picks or places an instance), with one log line per request when given a logger. */
export function runOn(serving: Serving, log?: Logger): RunRequest {
  const direct: RunRequest = (model, req, emit, signal) => serving.router.run(model, req, emit, signal, serving.readyTimeoutMs);
  return log ? logRequests(direct, log) : direct;
}

const tokenizers = new Map<string, ModelTokenizer>();

/** The tokenizer of a model whose files are on this node, or null; a tokenizer that cannot be built throws ModelFilesError (503, named). */
export function localTokenizer(serving: Serving, model: string): ModelTokenizer | null {
  const dir = serving.catalog.pathOf(model);
  if (!dir) return null;
  let t = tokenizers.get(dir);
  if (!t) {
    try {
      t = loadTokenizer(dir);
    } catch (err) {
      throw new ModelFilesError(model, (err as Error).message);
    }
    tokenizers.set(dir, t);
  }
  return t;
}

/** Status, code and message of an error from a request's translation or run; anything else is an internal error. */
export function errorStatus(err: unknown): { status: number; code: string; message: string; param: string | null } {
  if (err instanceof DialectError) return { status: err.status, code: err.code, message: err.message, param: err.param };
  if (err instanceof ServeError) return { status: err.status === 499 ? 503 : err.status, code: err.code, message: err.message, param: null };
  return { status: 500, code: 'internal_error', message: 'internal error', param: null };
}

/** An abort signal that fires when the client goes away before `finish()` is called. */
export function clientGone(reply: FastifyReply): { signal: AbortSignal; finish: () => void } {
  const abort = new AbortController();
  let finished = false;
  reply.raw.on('close', () => {
    if (!finished) abort.abort();
  });
  return { signal: abort.signal, finish: () => (finished = true) };
}

type Run = ReturnType<typeof runOn>;
type Done = Extract<ServeEvent, { type: 'done' }>;
export type ErrorInfo = ReturnType<typeof errorStatus>;

/** Runs a request to its end (a non-streamed answer): its done event, or why it failed. */
export async function runToEnd(run: Run, model: string, req: ServeRequest, reply: FastifyReply, onEvent: (e: ServeEvent) => void): Promise<{ done: Done } | { error: ErrorInfo }> {
  const gone = clientGone(reply);
  let done: Done | null = null;
  try {
    await run(model, req, (e) => (e.type === 'done' ? (done = e) : onEvent(e)), gone.signal);
  } catch (err) {
    return { error: errorStatus(err) };
  } finally {
    gone.finish();
  }
  return done ? { done } : { error: { status: 503, code: 'instance_failed', message: 'the instance ended the request without an answer', param: null } };
}

export interface StreamFraming {
  contentType: string;
  /** The text written for an event ('' for nothing); called with 'done' too. The head goes out before the first. */
  frame(e: ServeEvent): string;
  /** Written once, right after the head (Anthropic's message_start, the Responses' response.created). */
  opening?(): string;
  /** The body of an error answered before anything was streamed (JSON, with its status). */
  errorBody(e: ErrorInfo): unknown;
  /** The text of an error after the stream began. */
  midStreamError(e: ErrorInfo): string;
}

/** Streams a request's events on the hijacked reply; an error before the first event is a plain JSON error. */
export async function runStreaming(run: Run, model: string, req: ServeRequest, reply: FastifyReply, f: StreamFraming): Promise<void> {
  const gone = clientGone(reply);
  reply.hijack();
  const res = reply.raw;
  let started = false;
  let corked = false;
  const write = (text: string) => {
    if (!text && started) return;
    if (!res.writableEnded && !res.destroyed && !corked) {
      // The runner sends tokens in batches (token-batch.ts): the events of one batch arrive in one turn,
      // and go out in one socket write at its end instead of a write (a syscall) per token.
      corked = true;
      res.cork();
      process.nextTick(() => {
        corked = false;
        res.uncork();
      });
    }
    if (!started) {
      started = true;
      res.writeHead(200, { 'content-type': f.contentType, 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
      const open = f.opening?.();
      if (open) res.write(open);
    }
    if (text && !res.writableEnded && !res.destroyed) res.write(text);
  };
  try {
    await run(model, req, (e) => write(f.frame(e)), gone.signal);
    // A run that ended without a single event is answered as runToEnd answers a missing answer.
    if (!started) throw new ServeError(503, 'instance_failed', 'the instance ended the request without an answer');
    res.end();
  } catch (err) {
    const e = errorStatus(err);
    if (!started) {
      res.writeHead(e.status, { 'content-type': 'application/json', ...errorHeaders(e.status, e.code) });
      res.end(JSON.stringify(f.errorBody(e)));
      return;
    }
    if (!res.writableEnded) res.end(f.midStreamError(e));
  } finally {
    gone.finish();
  }
}

/** Server-sent events, named: `event: NAME` + `data: JSON`. */
export function namedEvents(events: { event: string; data: unknown }[]): string {
  return events.map((ev) => `event: ${ev.event}\ndata: ${JSON.stringify(ev.data)}\n\n`).join('');
}
