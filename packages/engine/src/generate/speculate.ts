/**
 * Checking a draft (speculative decoding). A verify step feeds the sequence's last token and the draft
 * d0..d(k-1) in one forward with every row's logits: row j is the model's distribution after d(j-1).
 * Tokens are picked from the rows in order, each exactly as plain decode picks it (the same sampler and
 * constraint, in the same order), and the next row is used only while the picked token equals the draft
 * token fed in its place. For sampling this is the rejection rule for a draft that is one token with
 * certainty: d is kept with probability p(d), and otherwise the token is drawn from p without d,
 * renormalised — the plain distribution. And since the sampler draws exactly as plain decode would, a
 * seeded run gives the same tokens with or without drafts.
 */

/**
 * Picks a verify step's tokens: `row(j)` is row j's logits, `pick` turns logits into a token, `take`
 * receives each picked token and returns false when the sequence ends there (a stop, the budget, a
 * client gone). Returns how many tokens were picked, which is also how many of the fed rows hold
 * confirmed tokens (the last token and the draft tokens that were picked): the cache keeps those.
 */
export async function pickVerified<P extends { id: number }>(
  row: (j: number) => Float32Array,
  draft: readonly number[],
  pick: (logits: Float32Array) => Promise<P>,
  take: (picked: P) => boolean,
): Promise<number> {
  for (let j = 0; ; j++) {
    const picked = await pick(row(j));
    if (!take(picked) || j === draft.length || picked.id !== draft[j]) return j + 1;
  }
}

/** Rejected draft steps in a row after which drafting pauses for the longest time (2^n - 1 steps). */
const MAX_BACKOFF = 4;

/**
 * Adaptive draft length of one sequence. Every draft token costs a row of the verify forward: cheap while
 * a step is memory-bound, but not free. The length grows by one after a draft accepted whole, falls to
 * one more than the tokens accepted after a partial one, and after a draft rejected outright drafting
 * pauses for 1, 3, 7, then 15 steps (reset by any accepted token) — so text that does not repeat its
 * context costs a verify row only now and then.
 */
export class DraftLength {
  readonly max: number;
  #k: number;
  #misses = 0;
  #pause = 0;

  constructor(max: number) {
    if (!(Number.isInteger(max) && max >= 1)) throw new RangeError(`draft length must be an integer >= 1, got ${max}`);
    this.max = max;
    this.#k = max;
  }

  /** Draft tokens to ask for this step (0: not this step). */
  next(): number {
    if (this.#pause > 0) {
      this.#pause--;
      return 0;
    }
    return this.#k;
  }

  /** A verify step's result: `drafted` tokens fed, `accepted` of them confirmed. */
  observe(drafted: number, accepted: number): void {
    if (drafted === 0) return;
    if (accepted === drafted) this.#k = Math.min(this.max, this.#k + 1);
    else this.#k = Math.max(1, accepted + 1);
    if (accepted > 0) this.#misses = 0;
    else this.#pause = 2 ** Math.min(MAX_BACKOFF, ++this.#misses) - 1;
  }
}
