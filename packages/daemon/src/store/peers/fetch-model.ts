/**
 * Getting a model onto this node for an instance or a pull: every chunk it needs from the pod's
 * peers first (striped over all of them and all their links), the rest from the hub once per pod —
 * and for a node holding one pipeline stage, only that stage's tensors.
 */
import type { ModelStore, PullOptions, PullResult } from '../store.js';
import { HUB } from '../pod/fetch-file.js';
import type { WeightsService } from './weights-service.js';

/** A pull's options, the pod being this daemon's (weights service). */
export type FetchModelOptions = Omit<PullOptions, 'pod' | 'revision'>;

export async function fetchModel(weights: WeightsService, store: ModelStore, repo: string, o: FetchModelOptions = {}): Promise<PullResult & { holders: string[] }> {
  const result = await store.pull(repo, { ...o, pod: weights.pod });
  // The peers the bytes came from.
  const holders = Object.keys(result.bySource).filter((s) => s !== HUB && result.bySource[s] > 0).sort();
  return { ...result, holders };
}
