/**
 * Measured constants for the collectives. See docs in packages/transport/README.md ("Threshold").
 */

/**
 * The direct all-reduce (one step of latency, but each rank sends its buffer to all size-1 peers)
 * is used while `bytes * (size - 1)` — what one rank sends — is at most this; beyond it, the
 * pipelined ring (2(size-1) steps, 2(size-1)/size of the buffer per rank) wins. Two ranks always
 * use direct (same bytes either way). = 24 KiB buffers at 3 ranks, 16 KiB at 4.
 *
 * Measured with `pnpm bench:transport --threshold` (loopback processes, shared 2-core machine,
 * 2026-11-30, after the SIMD and zero-copy changes): 3 ranks: direct faster up to 16 KiB
 * (314 vs 341 us), ring from 32 KiB (325 vs 365 us); 4 ranks: direct up to 16 KiB (717 vs 747 us),
 * ring from 32 KiB (859 vs 918 us). The crossover lies between 48 KiB sent per rank (direct wins
 * at 16 KiB x 3) and 64 KiB (ring wins at 32 KiB x 2): 48 KiB. Tables in the README.
 */
export const ALLREDUCE_DIRECT_MAX_SEND_BYTES = 48 * 1024;

/**
 * Pipeline chunk: large enough to amortise per-frame costs, small enough to overlap steps.
 * Measured (3 rank processes on loopback, the two chunk sizes alternating, 2026-11-30): 1 MiB
 * against 256 KiB takes 15-20% less CPU per ring all-reduce (16 MiB: 44 vs 54-61 core-ms; each
 * frame's first read lands in the 64 KiB staging buffer and is copied, a quarter of a 256 KiB
 * frame) and is faster at 1, 16 and 64 MiB (16 MiB: 23-27 vs 28-35 ms). 2 and 4 MiB were no
 * clearer win within the noise, and pipeline less at mid sizes.
 */
export const PIPELINE_CHUNK_BYTES = 1024 * 1024;

/** Default time a peer may show no progress before its pending operations reject. */
export const DEFAULT_TIMEOUT_MS = 5000;
