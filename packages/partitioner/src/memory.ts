import type { Cluster } from './cluster.js';
import { type MemberShare, PREFILL_CHUNK, memberKvBytesPerToken, memberLayerBytes, memberShares } from './cost-model.js';
import type { Layout, StageLayout } from './layout.js';
import type { ModelSpec } from './model.js';
import { reservedSequences, type PlanRequest } from './request.js';

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

/** K/V cache bytes of every layer for `tokens` positions of `sequences` sequences. */
export function kvCacheBytes(model: Pick<ModelSpec, 'kvBytesPerTokenPerLayer' | 'numLayers'>, tokens: number, sequences: number): number {
  return model.kvBytesPerTokenPerLayer * model.numLayers * tokens * sequences;
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
      const w = stageWeightBytes(model, stage, shares[i], si === 0, si === n - 1, { index: i, size: stage.nodes.length });
      const kv = (stage.layers[1] - stage.layers[0]) * memberKvBytesPerToken(model, shares[i]) * req.contextTokens * reservedSequences(req);
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

/** Weights a member of a stage holds: its slice of each layer, plus its embedding / head bytes if first / last. */
export function stageWeightBytes(model: ModelSpec, stage: StageLayout, m: MemberShare, first: boolean, last: boolean, member: TensorMember = SOLE): number {
  let w = 0;
  for (let l = stage.layers[0]; l < stage.layers[1]; l++) w += memberLayerBytes(model.layers[l], m);
  return w + endBytes(model, first, last, member);
}

/** Which of a stage's tensor ranks a node is. */
export interface TensorMember {
  index: number;
  size: number;
}

const SOLE: TensorMember = { index: 0, size: 1 };

/**
 * Embedding and LM head bytes one tensor rank holds, as the engine loads them: the first stage's rank
 * 0 holds the whole embedding (it embeds for its stage-0 peers, which hold none); every last-stage
 * rank holds its block of ceil(vocab / size) head rows. A tied head on the rank that holds the table
 * is the table's leading rows, stored once. (lmHeadBytes includes the final norm, a few KB: spread
 * over the blocks, kept whole where the head is the table.)
 */
export function endBytes(model: ModelSpec, first: boolean, last: boolean, member: TensorMember = SOLE): number {
  const embeds = first && member.index === 0;
  let w = embeds ? model.embeddingBytes : 0;
  if (last && embeds && model.tiedEmbeddings) w += model.lmHeadBytes - model.embeddingBytes;
  else if (last) {
    const per = Math.ceil(model.vocabSize / member.size);
    const rows = Math.max(0, Math.min(model.vocabSize, (member.index + 1) * per) - member.index * per);
    w += (model.lmHeadBytes * rows) / model.vocabSize;
  }
  return w;
}
