/**
 * Errors the planner raises for bad input or impossible requests. Both carry everything a caller
 * needs to print one clear line; the CLI maps them to exit code 2.
 */

/** A model config or cluster description is malformed; `field` is the path of the offending value. */
export class InputError extends Error {
  constructor(
    /** Which input: "model config", "cluster", "request". */
    readonly source: string,
    /** Path of the offending field, e.g. `nodes[2].availableBytes`. */
    readonly field: string,
    /** What is wrong with it. */
    readonly problem: string,
  ) {
    super(`${source}: ${field} ${problem}`);
    this.name = 'InputError';
  }
}

/** No placement of the model fits the cluster; the numbers say by how much and what would help. */
export class InfeasibleError extends Error {
  constructor(
    message: string,
    /** Bytes the smallest placement needs in total (weights, KV cache, workspace, headroom). */
    readonly neededBytes: number,
    /** Bytes available on all nodes together. */
    readonly availableBytes: number,
    /** Concrete changes that would make it fit (more nodes, fewer bits, shorter context). */
    readonly suggestions: string[],
  ) {
    super(message);
    this.name = 'InfeasibleError';
  }
}
