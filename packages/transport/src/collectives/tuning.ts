/**
 * Measured constants for the collectives. See docs in packages/transport/README.md ("Threshold").
 */

/**
 * The direct all-reduce (one step of latency, but each rank sends its buffer to all size-1 peers)
 * is used while `bytes * (size - 1)` — what one rank sends — is at most this; beyond it, the
 * pipelined ring (2(size-1) steps, 2(size-1)/size of the buffer per rank) wins. Two ranks always
 * use direct (same bytes either way). = 32 KiB buffers at 3 ranks, ~21 KiB at 4.
 *
 * Measured with packages/transport/bench/threshold.ts (loopback processes, 2026-11-30, shared
 * 2-core machine): 3 ranks: direct faster up to 32 KiB (450 vs 460 us), ring from 64 KiB
 * (451 vs 760 us); 4 ranks: equal at 16 KiB (823 vs 774 us), ring from 32 KiB (859 vs 2829 us).
 * Both crossovers sit at 32-64 KiB sent per rank; 64 KiB is the upper end. See README.
 */
export const ALLREDUCE_DIRECT_MAX_SEND_BYTES = 64 * 1024;

/** Pipeline chunk: large enough to amortise per-frame costs, small enough to overlap steps. */
export const PIPELINE_CHUNK_BYTES = 256 * 1024;

/** Default time a peer may show no progress before its pending operations reject. */
export const DEFAULT_TIMEOUT_MS = 5000;
