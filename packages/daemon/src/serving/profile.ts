/**
 * How an instance serves: the context it holds per sequence, the prompt length its predictions assume,
 * the sequences it decodes together and its prompt chunk. One place for these numbers: the planner
 * reserves KV cache for this context, placement plans with it, the runners allocate it and the request
 * queue refuses prompts that do not fit it.
 */
import type { PlanRequest } from '@orchard/partitioner';

/** The context served when nobody asks for another (capped by the model's own). */
export const DEFAULT_CONTEXT = 4096;
/** The prompt length TTFT predictions assume. */
export const PREDICTED_PROMPT_TOKENS = 512;
/** Prompt tokens per forward pass. */
export const PROMPT_CHUNK = 32;

export interface ServingProfile {
  /** Tokens per sequence (prompt + answer). */
  contextTokens: number;
  promptTokens: number;
  /** Sequences decoded together in the speed prediction (one stream's speed). */
  sequences: number;
  /** Sequences the instance holds at once (its batch), each with KV cache for contextTokens. */
  kvSequences: number;
  /** Prompt tokens per forward pass. */
  maxBatch: number;
}

export interface ProfileSettings {
  /** Asked-for context; the model's own maximum still caps it. */
  context?: number;
  /** Sequences held at once (--batch). @default 1 */
  sequences?: number;
}

export function servingProfile(model: { maxContext: number }, settings: ProfileSettings = {}): ServingProfile {
  const contextTokens = Math.max(2, Math.min(model.maxContext, settings.context ?? DEFAULT_CONTEXT));
  return { contextTokens, promptTokens: Math.min(PREDICTED_PROMPT_TOKENS, contextTokens - 1), sequences: 1, kvSequences: settings.sequences ?? 1, maxBatch: PROMPT_CHUNK };
}

/** The planner's request for this profile. */
export function planRequestOf(p: ServingProfile): PlanRequest {
  return { contextTokens: p.contextTokens, promptTokens: p.promptTokens, sequences: p.sequences, kvSequences: p.kvSequences };
}
