/** Shared by the dialect route files (anthropic.ts, ollama.ts, responses.ts): running a request, errors, client aborts, tokenizers. */
import { loadTokenizer, type ModelTokenizer } from '@orchard/engine';
import type { FastifyReply } from 'fastify';
import type { Serving } from '../serving/serving.js';
import { ServeError, type ServeEvent, type ServeRequest } from '../serving/requests.js';
import { DialectError } from '../dialects/tools/plan.js';

/** Runs a request on the pod (the router picks or places an instance). */
export function runOn(serving: Serving): (model: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal) => Promise<void> {
  return (model, req, emit, signal) => serving.router.run(model, req, emit, signal, serving.readyTimeoutMs);
}

const tokenizers = new Map<string, ModelTokenizer>();

/** The tokenizer of a model whose files are on this node, or null. */
export function localTokenizer(serving: Serving, model: string): ModelTokenizer | null {
  const dir = serving.catalog.dirOf(model);
  if (!dir) return null;
  let t = tokenizers.get(dir);
  if (!t) tokenizers.set(dir, (t = loadTokenizer(dir)));
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
