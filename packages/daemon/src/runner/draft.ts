/**
 * What a speculating sequence drafts in a step, for both drivers: prompt lookup over its own context,
 * or what the draft model (draft-model.ts) proposed for it before the step was planned — as many tokens
 * as its adaptive length asks and the step's spare rows allow, leaving room for the token picked after
 * the last draft token in the budget and the cache.
 */
import { draftFromContext, type DraftLength, type KVCache, type PromptLookupOptions } from '@orchard/engine';

/** Most draft tokens per step unless told: a memory-bound step reads its weights once for all its rows. */
export const DRAFT_TOKENS = 8;

export interface Drafting {
  /** Its draft length; null when the sequence does not speculate. */
  draft: DraftLength | null;
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

export function nextDraft(seq: Drafting, spare: number, lookup: PromptLookupOptions): number[] {
  if (seq.byModel) {
    // The draft length was asked (and the proposal cut to it) when the draft model ran.
    const proposal = seq.proposal ?? [];
    seq.proposal = undefined;
    return proposal.slice(0, Math.max(0, draftLimit(seq, proposal.length, spare)));
  }
  const limit = draftLimit(seq, seq.draft?.next() ?? 0, spare);
  if (limit < 1) return [];
  return draftFromContext([...seq.req.promptIds, ...seq.tokens], limit, { ...lookup, draftTokens: limit });
}
