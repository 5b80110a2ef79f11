/**
 * Batched decode step micro-benchmark: forwardBatch over B one-token sequences, tokens per CPU-second of
 * the best and the median step (1 thread: the engine's own time, less exposed to a shared machine's load).
 *   pnpm exec tsx packages/engine/bench/batch-step.ts [model dir or gguf] [B,...] [steps]
 */
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWasmBackend } from '../src/kernels/wasm/backend.js';
import { loadModelConfig } from '../src/format/model-files.js';
import { loadShard } from '../src/model/forward.js';

const model = process.argv[2] || join(tmpdir(), 'orchard-bench-engine-v1/hf');
const batches = (process.argv[3] ?? '1,2,8').split(',').map(Number);
const steps = Number(process.argv[4] ?? 12);
const backend = createWasmBackend({ threads: 1, initialBytes: 256 * 2 ** 20 });
const L = loadModelConfig(model).numLayers;
const maxB = Math.max(...batches);
const shard = loadShard(model, { layers: [0, L], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend, maxBatch: Math.max(16, maxB), maxSeqLen: 256 });
for (const B of batches) {
  const caches = Array.from({ length: B }, () => shard.newCache());
  // a short prompt per sequence so attention has some history
  for (let s = 0; s < B; s++) await shard.forward({ tokens: [1 + s, 2, 3, 4, 5, 6, 7, 8] }, caches[s]);
  const step = () => shard.forwardBatch(caches.map((cache, s) => ({ input: { tokens: [(s * 7 + 3) % 200] }, cache })));
  await step();
  // per step CPU time; the best and the median step filter out the time other processes take from this core
  const times: number[] = [];
  for (let i = 0; i < steps; i++) {
    const c0 = process.cpuUsage();
    await step();
    const c = process.cpuUsage(c0);
    times.push((c.user + c.system) / 1e6);
  }
  times.sort((a, b) => a - b);
  const best = times[0];
  const median = times[Math.floor(times.length / 2)];
  console.log(`B=${B}: best ${(B / best).toFixed(1)} tok/s (${(best * 1000).toFixed(1)} ms/step), median ${(B / median).toFixed(1)} tok/s, load ${loadavg()[0].toFixed(2)}`);
  for (const c of caches) shard.releaseCache(c);
}
shard.dispose();
