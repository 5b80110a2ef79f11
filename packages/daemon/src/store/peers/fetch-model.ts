/**
 * Getting a model onto this node for an instance: from peers that hold it whole (content-addressed
 * chunks over libp2p, no hub bytes for the weights), else from the hub — only the tensors of this
 * node's pipeline stage when it holds one stage of several.
 */
import type { OrchardNode } from '../../node/create-node.js';
import type { ModelStore, PullEvent, PullResult } from '../store.js';
import type { TensorSelection } from '../safetensors-range.js';
import { peerChunkSource, peerModels } from './chunk-protocol.js';

export async function fetchModel(
  node: OrchardNode,
  store: ModelStore,
  repo: string,
  livePeers: string[],
  selection: TensorSelection | undefined,
  signal?: AbortSignal,
  onProgress?: (e: PullEvent) => void,
): Promise<PullResult & { holders: string[] }> {
  const holders: string[] = [];
  await Promise.all(
    livePeers.map(async (p) => {
      const models: string[] = await peerModels(node, p).catch(() => []);
      if (models.includes(repo)) holders.push(p);
    }),
  );
  holders.sort();
  const peers = holders.map((p) => peerChunkSource(node, p));
  // Peers hand out whole files only; a stage fetches its share from the hub when no peer has the model.
  const result = await store.pull(repo, { peers, selection: holders.length ? undefined : selection, signal, onProgress });
  return { ...result, holders };
}
