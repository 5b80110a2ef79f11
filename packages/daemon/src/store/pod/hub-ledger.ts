/**
 * Which node fetches which chunk from the hub, so a pod asks the hub for each byte once: the first
 * node to claim a chunk fetches it, and later claimants are told to take it from that node (which
 * serves it as soon as it is verified). Kept by the pod's coordinator; pure: claims in, answers out.
 *
 * A claim is re-granted when its holder is no longer live or when the claimant reports that the
 * holder failed it (gave up the chunk, went silent); nothing expires on a timer, so a slow hub
 * download is never fetched a second time alongside.
 */

export interface ClaimAnswer {
  /** Chunks the claimant fetches from the hub. */
  granted: number[];
  /** Chunks another node is fetching (or has fetched), by node. */
  elsewhere: Map<string, number[]>;
}

export interface ClaimOptions {
  /** Nodes the claimant could not get these chunks from: their claims pass to the claimant. */
  failed?: readonly string[];
  /** Whether a node is still in the pod. */
  live: (node: string) => boolean;
}

export class HubLedger {
  /** File key → chunk → the node that claimed it. */
  readonly #files = new Map<string, Map<number, string>>();

  claim(key: string, chunks: readonly number[], node: string, o: ClaimOptions): ClaimAnswer {
    let owners = this.#files.get(key);
    if (!owners) this.#files.set(key, (owners = new Map()));
    const failed = new Set(o.failed ?? []);
    const answer: ClaimAnswer = { granted: [], elsewhere: new Map() };
    for (const chunk of chunks) {
      const owner = owners.get(chunk);
      if (owner === undefined || owner === node || failed.has(owner) || !o.live(owner)) {
        owners.set(chunk, node);
        answer.granted.push(chunk);
      } else {
        const list = answer.elsewhere.get(owner) ?? [];
        list.push(chunk);
        answer.elsewhere.set(owner, list);
      }
    }
    return answer;
  }

  /** Drops the claims of nodes that left, and files nobody holds a claim on any more. */
  prune(live: (node: string) => boolean): void {
    for (const [key, owners] of this.#files) {
      for (const [chunk, node] of owners) if (!live(node)) owners.delete(chunk);
      if (owners.size === 0) this.#files.delete(key);
    }
  }

  /** Claims held, for tests and status: file key → node → chunk count. */
  summary(): Map<string, Map<string, number>> {
    const out = new Map<string, Map<string, number>>();
    for (const [key, owners] of this.#files) {
      const byNode = new Map<string, number>();
      for (const node of owners.values()) byNode.set(node, (byNode.get(node) ?? 0) + 1);
      out.set(key, byNode);
    }
    return out;
  }
}
