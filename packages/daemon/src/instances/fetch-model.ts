/**
 * Getting a model onto this node for an instance: from peers that hold it whole (content-addressed
 * chunks over libp2p, no hub bytes for the weights), else from the hub — only the tensors of this
 * node's pipeline stage when it holds one stage of several.
 */
import type { OrchardNode } from '../node/create-node.js';
import type { ModelStore, PullEvent, PullResult } from '../store/store.js';
import type { TensorSelection } from '../store/safetensors-range.js';
import { StoreError } from '../store/errors.js';
import { peerChunkSource, peerModels } from './chunk-protocol.js';

export async function fetchModel(
  node: OrchardNode,
  store: ModelStore,
  repo: string,
  livePeers: string[],
  selection: TensorSelection | undefined,
  signal?: AbortSignal,
  onProgress?: (e: PullEvent) => void,
  /** `hub: false`: peers only — a model no peer holds is an error, not a download nobody asked for. */
  o: { hub?: boolean } = {},
): Promise<PullResult & { holders: string[] }> {
  const holders: string[] = [];
  await Promise.all(
    livePeers.map(async (p) => {
      const models: string[] = await peerModels(node, p).catch(() => []);
      if (models.includes(repo)) holders.push(p);
    }),
  );
  holders.sort();
  if (holders.length === 0 && o.hub === false) throw new StoreError(`no peer in the pod holds ${repo}; pull it on one node first (orchard pull ${repo})`);
  const peers = holders.map((p) => peerChunkSource(node, p));
  // Peers hand out whole files only; a stage fetches its share from the hub when no peer has the model.
  const result = await store.pull(repo, { peers, selection: holders.length ? undefined : selection, signal, onProgress });
  return { ...result, holders };
}
