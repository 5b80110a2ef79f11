/**
 * Memory a node keeps for an instance it runs that the planner's plan does not hold: the draft model
 * (`--draft-model`: its weights, and its K/V for every sequence at its context) that the driving runner
 * loads, and the prefix cache (`--prefix-cache`) every rank keeps. The coordinator plans other nodes'
 * memory from their profiles and does not know their options, so each node says this number in its
 * profile (`reservedBytes`) and the cluster view takes it off the memory the node offers
 * (state/cluster-view.ts): a plan then leaves room for it wherever the instance's driver lands.
 */
import { kvCacheBytes } from '@orchard/partitioner';
import type { ModelDescription } from '../models/description.js';
import { describeModel } from '../models/describe.js';

export interface ReservedMemoryOptions {
  draftModel: string | null;
  prefixCacheBytes: number;
  /** Tokens per sequence instances serve; null: the serving default (then the draft's own longest context). */
  context: number | null;
  /** Sequences an instance decodes together. */
  batch: number;
}

/** The bytes; a draft model that cannot be described is an error naming its path. */
export async function reservedBytes(o: ReservedMemoryOptions, describe: (path: string) => Promise<ModelDescription> = describeModel): Promise<number> {
  let draft = 0;
  if (o.draftModel) {
    let d: ModelDescription;
    try {
      d = await describe(o.draftModel);
    } catch (err) {
      throw new Error(`--draft-model ${o.draftModel}: cannot size it for the memory plan: ${(err as Error).message}`);
    }
    // The draft's context is the instance's, capped at the draft's own (runner/draft-model.ts).
    const context = Math.min(o.context ?? d.maxContext, d.maxContext);
    draft = d.spec.totalBytes + kvCacheBytes(d.spec, context, Math.max(1, o.batch));
  }
  return Math.round(draft + Math.max(0, o.prefixCacheBytes));
}
