import type { LinkTable } from './cost-model.js';
import type { Layout } from './layout.js';
import { endBytes } from './memory.js';
import type { ModelSpec } from './model.js';

/**
 * How long a layout takes to get its weights onto its nodes, the way the daemon fetches them: a node
 * that already holds the model reads nothing; another takes its part (its stage's layers, rank 0
 * the embedding, the last stage the head; everything when there is one stage) from the nodes that
 * hold the model, striped over every link to each of them (two cables count twice); when no holder is
 * linked to it, from the hub — which the pod asks for each byte once, so the nodes fetching from it
 * share its rate, and tensor peers of a stage take the same bytes at the same time.
 */

/** Where a model's bytes are before it is loaded. */
export interface WeightSources {
  /** Nodes whose store holds the whole model. */
  holders: string[];
  /** The hub's download rate for the pod, bytes per second (shared by the nodes fetching from it). */
  hubBytesPerSecond: number;
}

export interface NodeLoad {
  /** Bytes the node must fetch. */
  bytes: number;
  fromPeersBytes: number;
  fromHubBytes: number;
  seconds: number;
}

export interface LoadEstimate {
  /** Until the slowest node holds its part. */
  seconds: number;
  perNode: Record<string, NodeLoad>;
  /** Bytes the hub serves (each once per pod). */
  hubBytes: number;
}

/** Bytes each node of a layout fetches (whole tensors of its stage; TP ranks do not fetch slices). */
export function fetchBytes(model: ModelSpec, layout: Layout): Record<string, number> {
  const out: Record<string, number> = {};
  const n = layout.stages.length;
  layout.stages.forEach((stage, si) => {
    let layers = 0;
    for (let l = stage.layers[0]; l < stage.layers[1]; l++) layers += model.layers[l].bytes;
    stage.nodes.forEach((id, i) => {
      out[id] = n === 1 ? model.totalBytes : layers + endBytes(model, si === 0 && i === 0, si === n - 1);
    });
  });
  return out;
}

export function expectedLoad(model: ModelSpec, layout: Layout, sources: WeightSources, links: LinkTable): LoadEstimate {
  const need = fetchBytes(model, layout);
  const holders = new Set(sources.holders);
  const perNode: Record<string, NodeLoad> = {};
  // Bytes the hub must serve: per stage, what its members fetch from it, once.
  let hubBytes = 0;
  const fromHub: string[] = [];
  for (const stage of layout.stages) {
    let stageHub = 0;
    for (const id of stage.nodes) {
      const bytes = holders.has(id) ? 0 : need[id];
      let rate = 0;
      for (const h of holders) if (h !== id) for (const l of links.between(id, h)) rate += (l.bandwidthGbps * 1e9) / 8;
      if (bytes === 0 || rate > 0) {
        perNode[id] = { bytes, fromPeersBytes: bytes, fromHubBytes: 0, seconds: bytes === 0 ? 0 : bytes / rate };
      } else {
        perNode[id] = { bytes, fromPeersBytes: 0, fromHubBytes: bytes, seconds: 0 };
        fromHub.push(id);
        stageHub = Math.max(stageHub, bytes);
      }
    }
    hubBytes += stageHub;
  }
  const hubSeconds = hubBytes > 0 ? hubBytes / sources.hubBytesPerSecond : 0;
  for (const id of fromHub) perNode[id].seconds = hubSeconds;
  const seconds = Math.max(0, ...Object.values(perNode).map((p) => p.seconds));
  return { seconds, perNode, hubBytes };
}
