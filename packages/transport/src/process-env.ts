/**
 * Environment for processes that run a data plane (the daemon's runners, the benchmark's and the
 * tests' rank processes), so that they all run it the same way.
 *
 * An encrypted connection turns every piece it seals or opens into a fresh node:crypto output
 * buffer (AEAD_PIECE_BYTES each, 64 KiB) that lives until the next garbage collection. glibc then
 * returns the freed top of its heap to the kernel (trim threshold 128 KiB, raised only by freeing
 * mmap'd chunks) and the next pieces fault those pages back in: one page fault per 4 KiB of
 * ciphertext. On the development VM a fault costs ~50 us, so faulting cost more than the cipher
 * (measured: 8,000-16,000 faults per 64 MiB sealed in 64 KiB pieces without this setting, 0-400
 * with it). With a 128 MiB trim threshold the heap keeps what the pieces freed and the next pieces
 * reuse it; a 32 MiB mmap threshold (glibc's own ceiling for its dynamic threshold) keeps the
 * engine's mid-sized buffers on the heap too instead of a fresh mapping per allocation. Other C
 * libraries ignore GLIBC_TUNABLES.
 */
export const DATA_PLANE_MALLOC_TUNABLES = 'glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=134217728';

/** `env` with the data-plane malloc settings added; settings already in GLIBC_TUNABLES win (they come later). */
export function dataPlaneProcessEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const own = env.GLIBC_TUNABLES;
  return { ...env, GLIBC_TUNABLES: own ? `${DATA_PLANE_MALLOC_TUNABLES}:${own}` : DATA_PLANE_MALLOC_TUNABLES };
}
