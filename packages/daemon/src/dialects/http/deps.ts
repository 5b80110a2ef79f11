/** What the dialect routes need from serving: run a request, list models, read a local model's tokenizer. */
import { loadTokenizer, type ModelTokenizer } from '@orchard/engine';
import type { FastifyReply } from 'fastify';
import type { InstanceManager } from '../../instances/manager.js';
import { ServeError, type ServeEvent, type ServeRequest } from '../../instances/requests.js';
import { DialectError } from '../tools/plan.js';

export interface DialectDeps {
  manager: InstanceManager;
  run(model: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal): Promise<void>;
  models(): string[];
}

const tokenizers = new Map<string, ModelTokenizer>();

/** The tokenizer of a model whose files are on this node, or null. */
export function localTokenizer(deps: DialectDeps, model: string): ModelTokenizer | null {
  const dir = deps.manager.catalog.dirOf(model);
  if (!dir) return null;
  let t = tokenizers.get(dir);
  if (!t) tokenizers.set(dir, (t = loadTokenizer(dir)));
  return t;
}

/** Status, code and message of an error from a request's run or translation (others are rethrown). */
export function errorStatus(err: unknown): { status: number; code: string; message: string; param: string | null } {
  if (err instanceof DialectError) return { status: err.status, code: err.code, message: err.message, param: err.param };
  if (err instanceof ServeError) return { status: err.status === 499 ? 503 : err.status, code: err.code, message: err.message, param: null };
  throw err;
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
