import { InputError } from './errors.js';

/** What the plan must serve. */
export interface PlanRequest {
  /** Tokens of context to reserve KV cache for, per sequence. @default 4096 */
  contextTokens: number;
  /** Prompt length used for the time-to-first-token prediction; decode speed is predicted at this
   * position (KV cache of the prompt read on every token). @default 512 */
  promptTokens: number;
  /** Sequences decoded together (batch); each gets its own KV cache. @default 1 */
  sequences: number;
}

export const DEFAULT_REQUEST: PlanRequest = { contextTokens: 4096, promptTokens: 512, sequences: 1 };

export function resolveRequest(partial: Partial<PlanRequest> = {}): PlanRequest {
  const r = { ...DEFAULT_REQUEST, ...stripUndefined(partial) };
  if (partial.promptTokens === undefined && r.promptTokens > r.contextTokens) r.promptTokens = r.contextTokens;
  for (const key of ['contextTokens', 'promptTokens', 'sequences'] as const) {
    const v = r[key];
    if (!Number.isInteger(v) || v < 1) throw new InputError('request', key, `must be a positive integer, got ${JSON.stringify(v)}`);
  }
  if (r.promptTokens > r.contextTokens) {
    throw new InputError('request', 'promptTokens', `(${r.promptTokens}) exceeds contextTokens (${r.contextTokens})`);
  }
  return r;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
