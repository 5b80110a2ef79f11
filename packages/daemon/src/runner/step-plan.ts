/**
 * Which rows a batched step carries, for both drivers: every decoding sequence's last token first,
 * then prompt chunks in the rows left — all of them when nobody decodes, else as many as the measured
 * step times allow (prefill-chunk.ts), and at least one row per waiting prompt, so simultaneous
 * arrivals all join — then draft rows of speculating sequences in the rows still left (speculation
 * never slows a new prompt's prefill).
 */
import type { PrefillChunker } from './prefill-chunk.js';
import type { StepSoFar } from './step-draft-policy.js';

export interface Plannable {
  /** Prompt tokens fed so far. */
  fed: number;
  req: { promptIds: readonly number[] };
  tokens: readonly number[];
}

/** A sequence's rows in the step: `ids`, the last `draft.length` of them a draft; `last`: its logits pick a token. */
export interface PlannedRows<S> {
  seq: S;
  ids: number[];
  last: boolean;
  draft: number[];
}

export interface StepPlan<S> {
  parts: PlannedRows<S>[];
  decodeRows: number;
  promptRows: number;
  /** Rows in the step, drafts included. */
  rows: number;
}

export function planStep<S extends Plannable>(seqs: readonly S[], maxBatch: number, chunker: PrefillChunker, draftFor: (seq: S, spare: number, step: StepSoFar) => number[]): StepPlan<S> {
  let room = maxBatch;
  const parts: PlannedRows<S>[] = [];
  for (const seq of seqs) {
    if (room === 0) break;
    if (seq.fed < seq.req.promptIds.length) continue;
    parts.push({ seq, ids: [seq.tokens[seq.tokens.length - 1]], last: true, draft: [] });
    room--;
  }
  const decodeRows = parts.length;
  let budget = decodeRows > 0 ? chunker.rows(room) : room;
  for (const seq of seqs) {
    const prompt = seq.req.promptIds;
    if (room === 0) break;
    if (seq.fed >= prompt.length) continue;
    const ids = prompt.slice(seq.fed, seq.fed + Math.min(room, Math.max(1, budget)));
    parts.push({ seq, ids, last: seq.fed + ids.length === prompt.length, draft: [] });
    budget -= ids.length;
    room -= ids.length;
  }
  const promptRows = maxBatch - room - decodeRows;
  // What the step holds before drafts: a draft's policy weighs its rows against what they slow (step-draft-policy.ts).
  const step: StepSoFar = { rows: maxBatch - room, tokens: decodeRows };
  for (const part of parts.slice(0, decodeRows)) {
    if (room === 0) break;
    part.draft = draftFor(part.seq, room, step);
    part.ids.push(...part.draft);
    room -= part.draft.length;
    step.rows = maxBatch - room;
  }
  return { parts, decodeRows, promptRows, rows: maxBatch - room };
}
