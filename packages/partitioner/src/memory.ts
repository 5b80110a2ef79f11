import type { Cluster } from './cluster.js';
import { type MemberShare, PREFILL_CHUNK, memberKvBytesPerToken, memberLayerBytes, memberShares } from './cost-model.js';
import type { Layout, StageLayout } from './layout.js';
import type { ModelSpec } from './model.js';
import type { PlanRequest } from './request.js';

/**
 * Memory a node needs for its part of a layout: weights, KV cache for the full context of every
 * sequence, activation workspace for a prefill chunk, and headroom for allocator slack.
 */

export interface MemoryBreakdown {
  weightsBytes: number;
  kvCacheBytes: number;
  workspaceBytes: number;
  headroomBytes: number;
  totalBytes: number;
  availableBytes: number;
}

/** Fixed headroom plus a fraction of everything else (fragmentation, framework buffers). */
export const HEADROOM_FIXED_BYTES = 512 * 1024 * 1024;
export const HEADROOM_FRACTION = 0.03;

/**
 * Activation workspace for one prefill chunk on a member: hidden-state buffers, its share of the
 * widest MLP intermediate, its heads' attention scores over the context, and (last stage) logits.
 */
export function workspaceBytes(model: ModelSpec, m: MemberShare, req: PlanRequest, isLast: boolean): number {
  const chunk = Math.min(req.promptTokens, PREFILL_CHUNK) * req.sequences;
  const hidden = 4 * model.hiddenSize;
  const mlp = 3 * model.maxIntermediate * m.share;
  const scores = m.heads * Math.min(req.contextTokens, req.promptTokens + PREFILL_CHUNK);
  const logits = isLast ? req.sequences * model.vocabSize * 4 : 0;
  return chunk * (hidden + mlp + scores) * 2 + logits;
}

export function withHeadroom(used: number): number {
  return HEADROOM_FIXED_BYTES + HEADROOM_FRACTION * used;
}

/**
 * Largest weights + KV bytes a node can take: available = used + headroom(used), minus workspace.
 */
export function usableBytes(available: number, workspace: number): number {
  return (available - HEADROOM_FIXED_BYTES) / (1 + HEADROOM_FRACTION) - workspace;
}

/** Per-node memory for a whole layout (a node appears in one stage). */
export function layoutMemory(model: ModelSpec, cluster: Cluster, layout: Layout, req: PlanRequest): Record<string, MemoryBreakdown> {
  const out: Record<string, MemoryBreakdown> = {};
  const n = layout.stages.length;
  layout.stages.forEach((stage, si) => {
    const shares = memberShares(model, stage);
    stage.nodes.forEach((id, i) => {
      const node = cluster.nodes.find((x) => x.id === id)!;
      const w = stageWeightBytes(model, stage, shares[i], si === 0, si === n - 1);
      const kv = (stage.layers[1] - stage.layers[0]) * memberKvBytesPerToken(model, shares[i]) * req.contextTokens * req.sequences;
      const ws = workspaceBytes(model, shares[i], req, si === n - 1);
      const used = w + kv + ws;
      const headroom = withHeadroom(used);
      out[id] = {
        weightsBytes: Math.round(w),
        kvCacheBytes: Math.round(kv),
        workspaceBytes: Math.round(ws),
        headroomBytes: Math.round(headroom),
        totalBytes: Math.round(used + headroom),
        availableBytes: node.availableBytes,
      };
    });
  });
  return out;
}

/** Weights a member of a stage holds: its slice of each layer, plus embedding / head if first / last. */
export function stageWeightBytes(model: ModelSpec, stage: StageLayout, m: MemberShare, first: boolean, last: boolean): number {
  let w = 0;
  for (let l = stage.layers[0]; l < stage.layers[1]; l++) w += memberLayerBytes(model.layers[l], m);
  return w + endBytes(model, first, last);
}

/** Embedding on the first stage, head on the last; a tied head on a single stage is stored once. */
export function endBytes(model: ModelSpec, first: boolean, last: boolean): number {
  let w = 0;
  if (first) w += model.embeddingBytes;
  if (last) w += first && model.tiedEmbeddings ? model.lmHeadBytes - model.embeddingBytes : model.lmHeadBytes;
  return w;
}
