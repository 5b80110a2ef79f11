/**
 * What both drivers do with a running sequence's picked tokens: the checks plain decode makes per token
 * (a stop id, the client gone, the budget, the context full) and the outcome the request resolves with.
 */
import type { TokenLogprob } from '@orchard/engine';
import type { GenerateOutcome, GenerateRequest } from './requests.js';
import type { SequenceDraftPolicy } from './step-draft-policy.js';

export type OnToken = (id: number, logprob?: TokenLogprob) => boolean;
export type Picked = { id: number; logprob?: TokenLogprob };
export type FinishReason = GenerateOutcome['finishReason'];

export interface SequenceState {
  req: GenerateRequest;
  capacity: number;
  onToken: OnToken;
  tokens: number[];
  /** Prompt tokens copied from the prefix cache. */
  cached: number;
  /** When the request arrived, and when its prompt was all fed. */
  t0: number;
  t1: number;
  /** Its draft-length policy when it speculates, else null; draft tokens checked and confirmed so far. */
  draft: SequenceDraftPolicy | null;
  /** It drafts with the draft model, whose proposal for the step waits here (draft.ts). */
  byModel?: boolean;
  proposal?: number[];
  drafted: number;
  accepted: number;
}

/** A sequence's new token, picked with `length` tokens in its cache: hand it out; returns why the sequence ends here, or null. */
export function takeToken(seq: SequenceState, picked: Picked, length: number): FinishReason | null {
  const { req } = seq;
  if (req.maxTokens === 0) return 'length';
  seq.tokens.push(picked.id);
  const goOn = seq.onToken(picked.id, picked.logprob);
  if (req.stopTokenIds.includes(picked.id)) return 'stop';
  if (!goOn) return 'abort';
  if (seq.tokens.length >= req.maxTokens || length >= seq.capacity) return 'length';
  return null;
}

/** A draft's check: `drafted` tokens fed, `confirmed` of them picked; adapts the draft length and counts both, per sequence and in `stats`. */
export function countDraft(seq: SequenceState, stats: { drafted: number; accepted: number }, drafted: number, confirmed: number): void {
  if (drafted === 0) return;
  seq.draft!.observe(drafted, confirmed);
  seq.drafted += drafted;
  seq.accepted += confirmed;
  stats.drafted += drafted;
  stats.accepted += confirmed;
}

export function outcomeOf(seq: SequenceState, finishReason: FinishReason): GenerateOutcome {
  return {
    tokens: seq.tokens,
    finishReason,
    promptTokens: seq.req.promptIds.length,
    prefillMs: seq.t1 - seq.t0,
    decodeMs: seq.req.maxTokens === 0 ? 0 : performance.now() - seq.t1,
    cachedPromptTokens: seq.cached,
    ...(seq.draft ? { speculation: { drafted: seq.drafted, accepted: seq.accepted } } : {}),
  };
}
