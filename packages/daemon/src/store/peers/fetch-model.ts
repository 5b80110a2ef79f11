/**
 * Getting a model onto this node for an instance or a pull: every chunk it needs from the pod's
 * peers first (striped over all of them and all their links), the rest from the hub once per pod —
 * and for a node holding one pipeline stage, only that stage's tensors.
 */
import type { PullEvent, PullResult, ModelStore } from '../store.js';
import type { TensorSelection } from '../safetensors-range.js';
import { HUB } from '../pod/fetch-file.js';
import type { WeightsService } from './weights-service.js';

export interface FetchModelOptions {
  selection?: TensorSelection;
  /** Peers only: no listing or byte from the hub. */
  fromPod?: boolean;
  signal?: AbortSignal;
  onProgress?: (e: PullEvent) => void;
  onBadPeer?: (peer: string, file: string, chunk: number, why: string) => void;
  onLedgerUnreachable?: (err: Error) => void;
}

export async function fetchModel(weights: WeightsService, store: ModelStore, repo: string, o: FetchModelOptions = {}): Promise<PullResult & { holders: string[] }> {
  const result = await store.pull(repo, { ...o, pod: weights.pod });
  // The peers the bytes came from.
  const holders = Object.keys(result.bySource).filter((s) => s !== HUB && result.bySource[s] > 0).sort();
  return { ...result, holders };
}
