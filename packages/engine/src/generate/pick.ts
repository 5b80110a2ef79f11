/**
 * One sampling step: mask what a constraint forbids, sample, advance the constraint, and report the
 * token's log-probability under the model (taken before the mask) when asked. Shared by in-process
 * generation and the runners' sampling rank.
 */
import type { TokenConstraint } from './constraint.js';
import { tokenLogprob, type Sampler, type TokenLogprob } from './sampler.js';

export async function pickToken(logits: Float32Array, sampler: Sampler, constraint: TokenConstraint | null, logprobs?: number): Promise<{ id: number; logprob?: TokenLogprob }> {
  // The grammar masks in place: logprobs are of the model's own distribution, so taken first.
  const raw = logprobs !== undefined && constraint ? logits.slice() : logits;
  if (constraint) await constraint.mask(logits);
  const id = sampler.sample(logits);
  constraint?.accept(id);
  return logprobs === undefined ? { id } : { id, logprob: tokenLogprob(raw, id, logprobs) };
}
