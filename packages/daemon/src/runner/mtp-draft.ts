/**
 * Served drafting with the checkpoint's multi-token-prediction layer (DeepSeek-V3
 * num_nextn_predict_layers; engine model/mtp.ts and generate/mtp-draft.ts, what `orchard run --mtp`
 * uses), in a one-rank CPU instance's batch driver: each sequence that speculates with `mtp` has its
 * own MtpDrafter (its own MTP KV cache). Before a step is planned, a decoding sequence asks its policy
 * for a length and the drafter proposes that many tokens (the proposal then rides the step as a draft
 * model's does, draft.ts); after the step, the drafter is given the final hidden states (after the
 * model's final norm) of the rows the sequence kept: a prompt chunk's, or the confirmed rows of a verify.
 *
 * The MTP layer needs every position's hidden state from 0 on, so such a sequence does not copy a cached
 * prefix (prefill computes them). Only where the whole model runs in this rank: a split instance's
 * driver does not see the last stage's hidden states.
 */
import type { MtpDrafter } from '@orchard/engine';
import { draftLimit, type Drafting } from './draft.js';
import type { StepSoFar } from './step-draft-policy.js';

export interface MtpDrafting extends Drafting {
  mtp?: MtpDrafter;
  fed: number;
}

/**
 * Leaves in `proposal` the draft of every decoding sequence among `seqs` that drafts with its MTP layer;
 * each draft's time on `clock` (ms) is the sequence policy's drafter cost (observeDraftCost).
 */
export async function proposeMtp(seqs: readonly MtpDrafting[], spare: number, clock: () => number = () => performance.now()): Promise<void> {
  const decoding = seqs.filter((s) => s.fed >= s.req.promptIds.length);
  const step: StepSoFar = { rows: seqs.length, tokens: decoding.length };
  for (const seq of decoding) {
    if (!seq.mtp || !seq.draft) continue;
    const k = seq.draft.nextIn(step, draftLimit(seq, seq.draft.max, spare));
    const t0 = clock();
    seq.proposal = k >= 1 ? await seq.mtp.draft([...seq.req.promptIds, ...seq.tokens], k) : [];
    if (k >= 1) seq.draft.observeDraftCost(seq.proposal.length, clock() - t0);
    seq.draft.add(step, seq.proposal.length);
  }
}

