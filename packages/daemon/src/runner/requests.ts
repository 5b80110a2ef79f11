/** What a runner is asked to generate and what it answers: the request types every driver and the IPC protocol share. */
import type { ConstraintSpec, SamplingOptions, SamplingPenalties, TokenConstraint } from '@orchard/engine';

export interface GenerateRequest extends SamplingOptions, SamplingPenalties {
  promptIds: number[];
  maxTokens: number;
  stopTokenIds: number[];
  /** What the output must match (applied where the driver samples). */
  constraint?: ConstraintSpec;
  /** Report each token's logprob and this many alternatives. */
  logprobs?: number;
  /** Speculative decoding for this request; else the runner's setting (off where a rank runs on a GPU). */
  speculate?: Speculate;
}

/**
 * How a runner speculates: prompt lookup (drafts from the sequence's own context), a draft model
 * (draft-model.ts), the checkpoint's multi-token-prediction layer (mtp-draft.ts), or not at all.
 */
export type Speculate = 'prompt-lookup' | 'draft' | 'mtp' | 'off';

/**
 * Compiles a request's constraint against this rank's tokenizer (runner-main provides it). Null: an
 * optional constraint that could not be compiled (the sequence runs unconstrained).
 */
export type CompileConstraint = (spec: ConstraintSpec, stopIds: number[]) => Promise<TokenConstraint | null>;

export interface GenerateOutcome {
  tokens: number[];
  finishReason: 'stop' | 'length' | 'abort';
  promptTokens: number;
  prefillMs: number;
  decodeMs: number;
  /** Prompt tokens copied from the prefix cache instead of prefilled. */
  cachedPromptTokens?: number;
  /** A speculating request: draft tokens fed, and how many of them the model confirmed. */
  speculation?: { drafted: number; accepted: number };
}
