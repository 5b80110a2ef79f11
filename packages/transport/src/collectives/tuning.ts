/**
 * Measured constants for the collectives. See docs in packages/transport/README.md ("Threshold").
 */

/**
 * All-reduce payloads up to this many bytes use the direct algorithm (one step of latency);
 * larger ones use the pipelined ring (2(size-1) steps, 2(size-1)/size bytes per link).
 * Measured with `pnpm bench:transport --threshold` (3 processes, loopback): see README.
 */
export const ALLREDUCE_DIRECT_MAX_BYTES = 32 * 1024;

/** Pipeline chunk: large enough to amortise per-frame costs, small enough to overlap steps. */
export const PIPELINE_CHUNK_BYTES = 256 * 1024;

/** Default time a peer may show no progress before its pending operations reject. */
export const DEFAULT_TIMEOUT_MS = 5000;
