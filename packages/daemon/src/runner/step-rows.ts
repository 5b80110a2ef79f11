/** A step's rows between forwards: hidden states in and out of a stage, and a draft's check over its logit rows. */
import { pickVerified, type BatchSegment, type KVCache } from '@orchard/engine';
import type { Segment } from './header.js';
import type { Picked } from './sequence.js';

/** How the driver, when it samples itself, turns logits into the next id (mask, sample, logprobs): per request. */
export type Pick = (logits: Float32Array) => Promise<Picked>;

/**
 * The tokens a draft's check confirms: `logits` holds a row per fed token (the last token, then the
 * draft); each row's pick is kept while it equals the draft token fed after it (pickVerified), all of
 * them picked here — the driver then hands them out until the sequence ends.
 */
export async function confirmDraft(logits: Float32Array, draft: readonly number[], pick: Pick): Promise<Picked[]> {
  const V = logits.length / (draft.length + 1);
  const picked: Picked[] = [];
  await pickVerified((j) => logits.subarray(j * V, (j + 1) * V), draft, pick, (r) => (picked.push(r), true));
  return picked;
}

/** A step's segments as forward inputs over `rows` (n·hidden f32 each, in segment order), each continuing its cache. */
export function hiddenSegments(rows: Float32Array, D: number, segments: readonly Segment[], caches: readonly KVCache[]): BatchSegment[] {
  let at = 0;
  return segments.map((seg, i) => ({ input: { hidden: rows.subarray(at * D, (at += seg.n) * D), n: seg.n }, cache: caches[i], allLogits: seg.draft > 0 }));
}

/**
 * A step's hidden rows for the next stage, in segment order, as one array: the forward's own output
 * when it is one segment, else copied side by side into `buf` (a GPU rank's outputs are separate copies).
 */
export function joinRows(outs: Float32Array[], segments: readonly Segment[], D: number, buf: Float32Array): Float32Array {
  if (outs.length === 1) return outs[0].subarray(0, segments[0].n * D);
  let at = 0;
  outs.forEach((o, i) => {
    buf.set(o.subarray(0, segments[i].n * D), at);
    at += segments[i].n * D;
  });
  return buf.subarray(0, at);
}
