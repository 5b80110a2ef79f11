import { InputError } from './errors.js';

/** What the plan must serve. */
export interface PlanRequest {
  /** Tokens of context to reserve KV cache for, per sequence. @default 4096 */
  contextTokens: number;
  /** Prompt length used for the time-to-first-token prediction; decode speed is predicted at this
   * position (KV cache of the prompt read on every token). @default 512 */
  promptTokens: number;
  /** Sequences decoded together (batch) in the speed prediction; each gets its own KV cache. @default 1 */
  sequences: number;
  /**
   * Sequences an instance holds at once (its configured batch), each with KV cache for
   * `contextTokens`: what the memory plan reserves. Predictions stay at `sequences`, so a pod that
   * batches 8 still shows one stream's speed. @default sequences
   */
  kvSequences?: number;
}

/** Sequences whose KV cache the memory plan reserves. */
export function reservedSequences(req: PlanRequest): number {
  return req.kvSequences ?? req.sequences;
}

export const DEFAULT_REQUEST: PlanRequest = { contextTokens: 4096, promptTokens: 512, sequences: 1 };

export function resolveRequest(partial: Partial<PlanRequest> = {}): PlanRequest {
  const r = { ...DEFAULT_REQUEST, ...stripUndefined(partial) };
  if (partial.promptTokens === undefined && r.promptTokens > r.contextTokens) r.promptTokens = r.contextTokens;
  for (const key of ['contextTokens', 'promptTokens', 'sequences', 'kvSequences'] as const) {
    const v = r[key];
    if (key === 'kvSequences' && v === undefined) continue;
    if (!Number.isInteger(v) || (v as number) < 1) throw new InputError('request', key, `must be a positive integer, got ${JSON.stringify(v)}`);
  }
  if (r.promptTokens > r.contextTokens) {
    throw new InputError('request', 'promptTokens', `(${r.promptTokens}) exceeds contextTokens (${r.contextTokens})`);
  }
  return r;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
