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
