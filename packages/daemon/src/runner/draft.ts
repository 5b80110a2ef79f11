/**
 * What a speculating sequence drafts in a step, for both drivers: prompt lookup over its own context,
 * or what the draft model (draft-model.ts) proposed for it before the step was planned — as many tokens
 * as its policy asks (step-draft-policy.ts: what drafts earn in this step) and the step's spare rows allow, leaving room for the token picked after
 * the last draft token in the budget and the cache.
 */
import { draftFromContext, type KVCache, type PromptLookupOptions } from '@orchard/engine';
import type { SequenceDraftPolicy, StepSoFar } from './step-draft-policy.js';

/** Most draft tokens per step unless told: a memory-bound step reads its weights once for all its rows. */
export const DRAFT_TOKENS = 8;

export interface Drafting {
  /** Its draft-length policy; null when the sequence does not speculate. */
  draft: SequenceDraftPolicy | null;
  req: { promptIds: readonly number[]; maxTokens: number };
  tokens: readonly number[];
  cache: KVCache;
  capacity: number;
  /** Drafts come from the draft model, which leaves each step's proposal here (else prompt lookup). */
  byModel?: boolean;
  proposal?: number[];
}

/** The most draft tokens `seq` may feed this step when `want` are asked and `spare` rows are left. */
export function draftLimit(seq: Drafting, want: number, spare: number): number {
  return Math.min(want, spare, seq.req.maxTokens - seq.tokens.length - 1, seq.capacity - seq.cache.length - 1);
}

/** The draft `seq` feeds in `step` (the step as planned so far, which the draft is counted into). */
export function nextDraft(seq: Drafting, spare: number, lookup: PromptLookupOptions, step: StepSoFar): number[] {
  if (!seq.draft) return [];
  let draft: number[] = [];
  if (seq.byModel) {
    // The draft length was asked (and the proposal cut to it) when the draft model ran.
    const proposal = seq.proposal ?? [];
    seq.proposal = undefined;
    draft = proposal.slice(0, Math.max(0, draftLimit(seq, proposal.length, spare)));
  } else {
    const k = seq.draft.nextIn(step, draftLimit(seq, seq.draft.max, spare));
    if (k >= 1) draft = draftFromContext([...seq.req.promptIds, ...seq.tokens], k, { ...lookup, draftTokens: k });
  }
  seq.draft.add(step, draft.length);
  return draft;
}
