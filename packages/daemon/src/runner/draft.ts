/**
 * What a speculating sequence drafts in a step, for both drivers: prompt lookup over its own context,
 * as many tokens as its adaptive length asks and the step's spare rows allow, leaving room for the
 * token picked after the last draft token in the budget and the cache.
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
}

export function nextDraft(seq: Drafting, spare: number, lookup: PromptLookupOptions): number[] {
  const want = seq.draft?.next() ?? 0;
  const limit = Math.min(want, spare, seq.req.maxTokens - seq.tokens.length - 1, seq.capacity - seq.cache.length - 1);
  if (limit < 1) return [];
  return draftFromContext([...seq.req.promptIds, ...seq.tokens], limit, { ...lookup, draftTokens: limit });
}
