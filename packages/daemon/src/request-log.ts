/**
 * One log line per generation request: model, tokens in and out, decode speed, time to first token,
 * total time and the HTTP status it ended with. Wraps the function that runs a request, so every
 * route that generates (chat, completions; streamed or not) logs the same way.
 */
import type { Logger } from 'pino';
import { ServeError } from './requests/errors.js';
import type { ServeEvent, ServeRequest } from './requests/request.js';

export type RunRequest = (model: string, req: ServeRequest, emit: (e: ServeEvent) => void, signal: AbortSignal) => Promise<void>;

export interface RequestRecord {
  model: string;
  kind: ServeRequest['kind'];
  status: number;
  promptTokens: number | null;
  completionTokens: number | null;
  /** Decode speed as the instance measured it (null under 2 tokens). */
  tokensPerSecond: number | null;
  /** Time to the first generated text, reasoning or call, from when the request reached this function. */
  ttftMs: number | null;
  ms: number;
  finishReason?: string;
  error?: string;
}

/** The line's message: readable on its own in the pretty console ("orchard-demo 200 · 40 tokens · 87.5 tok/s · TTFT 52 ms"). */
export function describeRequest(r: RequestRecord): string {
  const parts = [`${r.model} ${r.status}`];
  if (r.completionTokens !== null) parts.push(`${r.promptTokens ?? '?'}+${r.completionTokens} tokens`);
  if (r.tokensPerSecond !== null) parts.push(`${r.tokensPerSecond.toFixed(1)} tok/s`);
  if (r.ttftMs !== null) parts.push(`TTFT ${Math.round(r.ttftMs)} ms`);
  parts.push(`${Math.round(r.ms)} ms`);
  if (r.error) parts.push(r.error);
  return `request ${parts.join(' · ')}`;
}

export function logRequests(run: RunRequest, log: Logger, now: () => number = () => performance.now()): RunRequest {
  return async (model, req, emit, signal) => {
    const t0 = now();
    let first: number | null = null;
    let done: Extract<ServeEvent, { type: 'done' }> | null = null;
    let promptTokens: number | null = null;
    const record = (status: number, error?: string): RequestRecord => ({
      model,
      kind: req.kind,
      status,
      promptTokens: done?.promptTokens ?? promptTokens,
      completionTokens: done?.completionTokens ?? null,
      tokensPerSecond: done?.decodeTokensPerSecond ?? null,
      ttftMs: first === null ? null : first - t0,
      ms: now() - t0,
      ...(done ? { finishReason: done.finishReason } : {}),
      ...(error ? { error } : {}),
    });
    try {
      await run(
        model,
        req,
        (e) => {
          if (e.type === 'start') promptTokens = e.promptTokens;
          // The first thing the model wrote, whatever its kind: a reply that opens with reasoning or a call has a first token too.
          if ((e.type === 'text' || e.type === 'reasoning' || e.type === 'tool_call') && first === null) first = now();
          if (e.type === 'done') done = e;
          emit(e);
        },
        signal,
      );
    } catch (err) {
      const status = err instanceof ServeError ? (err.status === 499 ? 499 : err.status) : 500;
      const r = record(status, (err as Error)?.message ?? String(err));
      (status >= 500 ? log.warn : log.info).call(log, { request: r }, describeRequest(r));
      throw err;
    }
    const r = done ? record(200) : record(503, 'ended without an answer');
    log.info({ request: r }, describeRequest(r));
  };
}
