/**
 * Prompt-lookup drafting (n-gram speculation without a second model): the tokens that followed the
 * most recent earlier occurrence of the context's last n tokens (longest n first) are guessed to come
 * next. Text that repeats its prompt — code edits, quotes, summaries — drafts long runs correctly.
 * When the tokens after the match run into the context's end, the guess goes on as the text has so far:
 * the match was followed by what the tail is followed by, so the span repeats (an overlapping copy, as
 * in LZ77) — a cycle of p tokens drafts as far as asked, not only p tokens.
 */
export interface PromptLookupOptions {
  /** Most tokens drafted per step (the verify forward feeds this many + 1). @default 4 */
  draftTokens?: number;
  /** Longest suffix matched; shorter ones are tried down to `minNgram`. @default 3 */
  maxNgram?: number;
  /** Shortest suffix matched: a single repeated token guesses too often to pay for its verify rows. @default 2 */
  minNgram?: number;
  /**
   * generate(): choose each draft's length (up to draftTokens) by the acceptance so far and the timed cost
   * of a verify row, drafting nothing while drafts would not pay (draft-policy.ts); false drafts
   * draftTokens whenever the context has a match. Either way the output is the plain decode's. @default true
   */
  adaptive?: boolean;
}

/** Up to `limit` tokens guessed to follow `context`; none when its tail occurs nowhere earlier. */
export function draftFromContext(context: readonly number[], limit: number, options: PromptLookupOptions = {}): number[] {
  const maxN = options.maxNgram ?? 3;
  const minN = options.minNgram ?? 2;
  const len = context.length;
  limit = Math.min(limit, options.draftTokens ?? 4);
  if (limit < 1) return [];
  for (let n = Math.min(maxN, len - 1); n >= minN; n--) {
    // Latest start p < len - n whose n tokens equal the tail's.
    for (let p = len - n - 1; p >= 0; p--) {
      let k = 0;
      while (k < n && context[p + k] === context[len - n + k]) k++;
      if (k === n) return continuation(context, p + n, limit);
    }
  }
  return [];
}

/** `limit` tokens copied from `from` on, the copy continuing over its own output past the context's end. */
function continuation(context: readonly number[], from: number, limit: number): number[] {
  const span = context.length - from;
  const out: number[] = [];
  for (let k = 0; k < limit; k++) out.push(k < span ? context[from + k] : out[k - span]);
  return out;
}
