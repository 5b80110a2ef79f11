/**
 * Environment for processes that run a data plane (the daemon's runners, the benchmark's and the
 * tests' rank processes), so that they all run it the same way.
 *
 * An encrypted connection turns every piece it seals or opens into a fresh node:crypto output
 * buffer (AEAD_PIECE_BYTES each) that lives until the next garbage collection. By default glibc
 * maps allocations over 128 KiB afresh and returns the freed top of its heap to the kernel (trim
 * threshold 128 KiB, both raised only after freeing a mapped chunk), and the next pieces fault
 * those pages back in: one page fault per 4 KiB of ciphertext. On the development VM a fault costs
 * ~50 us, more than encrypting the page (measured, 64 KiB pieces: 8,000-16,000 faults per 64 MiB
 * sealed without these settings, 0-400 with them). A 32 MiB mmap threshold (glibc's own ceiling for
 * its dynamic threshold) keeps the pieces, and the engine's mid-sized buffers, on the heap; a
 * 128 MiB trim threshold keeps the heap that garbage collection frees, for the next pieces to reuse.
 * Other C libraries ignore GLIBC_TUNABLES.
 */
export const DATA_PLANE_MALLOC_TUNABLES = 'glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=134217728';

/** `env` with the data-plane malloc settings added; settings already in GLIBC_TUNABLES win (they come later). */
export function dataPlaneProcessEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const own = env.GLIBC_TUNABLES;
  return { ...env, GLIBC_TUNABLES: own ? `${DATA_PLANE_MALLOC_TUNABLES}:${own}` : DATA_PLANE_MALLOC_TUNABLES };
}
