/**
 * The coordinator is a pure function of who is live: the smallest peer id (string order). Every
 * node computes it from its own liveness view; views agree once heartbeats have crossed.
 */
export function electCoordinator(livePeerIds: Iterable<string>): string | null {
  let best: string | null = null;
  for (const id of livePeerIds) if (best === null || id < best) best = id;
  return best;
}
