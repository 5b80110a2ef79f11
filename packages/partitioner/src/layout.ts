/**
 * A placement of the model on nodes, before and after prediction: stages in pipeline order, each a
 * node or a tensor-parallel group holding a contiguous range of layers.
 */

export interface StageLayout {
  /** Node ids; more than one means the stage is a tensor-parallel group. */
  nodes: string[];
  /** Query heads each node computes (same order as `nodes`, sum = the model's heads). Whole heads
   * only; the node's share of the MLP/expert columns follows the same fraction. */
  heads: number[];
  /** Decoder layers [start, end): start inclusive, end exclusive. */
  layers: [number, number];
}

export interface Layout {
  stages: StageLayout[];
}

export type Strategy = 'single' | 'pipeline' | 'tensor' | 'hybrid';

export function strategyOf(layout: Layout): Strategy {
  const tp = layout.stages.some((s) => s.nodes.length > 1);
  if (layout.stages.length === 1) return tp ? 'tensor' : 'single';
  return tp ? 'hybrid' : 'pipeline';
}

/**
 * Splits `total` whole heads among members in proportion to `weights`, each member getting at
 * least one (largest remainder; ties go to the earlier member, so the result is deterministic).
 */
export function splitHeads(total: number, weights: number[]): number[] {
  const k = weights.length;
  if (k > total) throw new Error(`cannot split ${total} heads over ${k} nodes`);
  const sum = weights.reduce((a, b) => a + b, 0);
  const spare = total - k; // one head each is guaranteed
  const exact = weights.map((w) => (sum > 0 ? (w / sum) * total : total / k) - 1);
  const out = exact.map((x) => Math.max(0, Math.floor(x)));
  let left = spare - out.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => ({ i, r: x - Math.floor(x) })).sort((a, b) => b.r - a.r || a.i - b.i);
  for (let j = 0; left > 0; j = (j + 1) % k, left--) out[order[j].i]++;
  while (left < 0) {
    // Only reachable through clamping: take back from the largest.
    const i = out.indexOf(Math.max(...out));
    out[i]--;
    left++;
  }
  return out.map((x) => x + 1);
}

/**
 * How many distinct KV heads a member needs when query heads are dealt out in order: with grouped
 * query attention a KV head serves `heads / kvHeads` consecutive query heads, and a member whose
 * range touches a group needs that KV head (replicated when groups straddle members).
 */
export function kvHeadsPerMember(heads: number[], numHeads: number, numKvHeads: number): number[] {
  const group = numHeads / numKvHeads;
  let start = 0;
  return heads.map((h) => {
    const first = Math.floor(start / group);
    const last = Math.floor((start + h - 1) / group);
    start += h;
    return last - first + 1;
  });
}
