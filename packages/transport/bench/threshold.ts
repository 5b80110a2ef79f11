/**
 * `pnpm bench:transport --threshold` (env RANKS, ITERATIONS, ROUNDS):
 * measures direct vs ring all-reduce latency for 3 processes on loopback across sizes, to choose
 * ALLREDUCE_DIRECT_MAX_BYTES (collectives/tuning.ts). Prints one line per size and the crossover.
 */
import { startMesh } from '../src/testing/mesh.js';

const sizes = [4, 8, 16, 32, 64, 128, 256, 512].map((k) => k * 1024);
const ranks = Number(process.env.RANKS ?? 3);
const iterations = Number(process.env.ITERATIONS ?? 200);
const rounds = Number(process.env.ROUNDS ?? 3);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

const meshes = {
  direct: await startMesh(ranks, { thresholdBytes: 2 ** 40, timeoutMs: 30_000 }),
  ring: await startMesh(ranks, { thresholdBytes: 1, timeoutMs: 30_000 }),
};
const results: Record<string, { direct: number[]; ring: number[] }> = {};
try {
  // Alternate the two algorithms, several rounds, so both see the same machine load.
  for (let round = 0; round < rounds; round++) {
    for (const bytes of sizes) {
      for (const algo of ['direct', 'ring'] as const) {
        const rs = await meshes[algo].all<{ ms: number[] }>('allreduce', () => ({ elements: bytes / 4, iterations, verify: false }), 300_000);
        const us = Math.max(...rs.map((r) => median(r.ms.slice(10)))) * 1000;
        (results[bytes] ??= { direct: [], ring: [] })[algo].push(us);
      }
    }
  }
} finally {
  await meshes.direct.close();
  await meshes.ring.close();
}
let crossover: number | null = null;
console.log(`${ranks} ranks, median of ${rounds} rounds x ${iterations} iterations (us)`);
for (const bytes of sizes) {
  const d = median(results[bytes].direct);
  const r = median(results[bytes].ring);
  console.log(`${String(bytes / 1024).padStart(4)} KiB  direct ${d.toFixed(1).padStart(9)}  ring ${r.toFixed(1).padStart(9)}  ${d <= r ? 'direct' : 'ring'}`);
  if (crossover === null && r < d) crossover = bytes;
}
console.log(crossover === null ? 'direct wins at every size measured' : `ring first wins at ${crossover / 1024} KiB`);
