/**
 * What a forward of n tokens costs on the bundled demo model (wasm backend), against one token: the
 * verify step of speculative decoding (one session, n rows) and a batched decode step (n sessions, one
 * row each). Prints ms per step and the ratio to a 1-token step measured in the same run: the best CPU
 * time of the rounds (what the kernels cost with 1 thread; with more, other threads' CPU time is counted
 * unevenly) and the median wall time; sizes interleaved so a loaded machine disturbs all alike.
 *
 *   pnpm exec tsx packages/engine/bench/small-batch.ts [--threads 1] [--rounds 200] [--sizes 1,2,4,8,16]
 *     [--only verify|batch] [--context 64] [--threshold <parallelThreshold>] [--simd auto]
 */
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createWasmBackend } from '../src/kernels/wasm/backend.js';
import type { SimdBuild } from '../src/kernels/wasm/module.js';
import { loadInProcessModel } from '../src/drivers/in-process.js';

const { values } = parseArgs({
  options: {
    threads: { type: 'string', default: '1' },
    rounds: { type: 'string', default: '200' },
    sizes: { type: 'string', default: '1,2,4,8,16' },
    simd: { type: 'string', default: 'auto' },
    context: { type: 'string', default: '64' },
    only: { type: 'string', default: 'both' },
    threshold: { type: 'string' },
  },
});
const threads = Number(values.threads);
const rounds = Number(values.rounds);
const sizes = values.sizes!.split(',').map(Number);
const context = Number(values.context);
if (!Number.isInteger(threads) || threads < 1) throw new Error(`--threads: ${values.threads} is not a positive integer`);
if (sizes.some((n) => !Number.isInteger(n) || n < 1 || n > 16)) throw new Error(`--sizes: ${values.sizes} must be integers 1..16`);

const demo = join(import.meta.dirname, '../../../models/orchard-demo');
const model = loadInProcessModel(demo, { maxBatch: 16, backend: () => createWasmBackend({ threads, simd: values.simd as SimdBuild, ...(values.threshold ? { parallelThreshold: Number(values.threshold) } : {}) }) });
const prompt = Array.from({ length: context }, (_, i) => (i * 37) % 256);

// Verify: one session with `context` tokens, n rows forwarded then rewound.
const verify = model.newSession();
await verify.forward(prompt);
// Batch: 16 sessions with `context` tokens each, one row per session.
const sessions = Array.from({ length: 16 }, () => model.newSession());
for (const s of sessions) await s.forward(prompt);

const now = () => {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1000;
};
const samples = { verify: new Map<number, number[]>(), batch: new Map<number, number[]>(), verifyWall: new Map<number, number[]>(), batchWall: new Map<number, number[]>() };
const keep = (m: Map<number, number[]>, n: number, v: number) => {
  const list = m.get(n) ?? [];
  list.push(v);
  m.set(n, list);
};
for (let r = 0; r < rounds; r++) {
  for (const n of sizes) {
    const toks = prompt.slice(0, n);
    if (values.only !== 'batch') {
      const w0 = performance.now();
      const c0 = now();
      await verify.forwardAll!(toks);
      keep(samples.verify, n, now() - c0);
      keep(samples.verifyWall, n, performance.now() - w0);
      verify.rewind!(context);
    }
    if (values.only === 'verify') continue;
    const w0 = performance.now();
    const c0 = now();
    await model.forwardBatch(sessions.slice(0, n).map((session, i) => ({ session, tokens: [toks[i]] })));
    keep(samples.batch, n, now() - c0);
    keep(samples.batchWall, n, performance.now() - w0);
    for (const s of sessions.slice(0, n)) s.rewind!(context);
  }
}
const best = (m: Map<number, number[]>, n: number) => Math.min(...(m.get(n) ?? [NaN]));
const median = (m: Map<number, number[]>, n: number) => {
  const list = [...(m.get(n) ?? [NaN])].sort((a, b) => a - b);
  return list[list.length >> 1];
};
console.log(
  `demo model, wasm ${threads} thread(s), context ${context}, threshold ${values.threshold ?? 'default'}, ${rounds} rounds: best CPU ms (1 thread: the kernels' own cost) and median wall ms; load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
for (const [kind, cpu, wall] of [
  ['verify', samples.verify, samples.verifyWall],
  ['batch', samples.batch, samples.batchWall],
] as const) {
  if (!cpu.size) continue;
  for (const n of sizes) {
    const c = best(cpu, n);
    const w = median(wall, n);
    const agg = kind === 'batch' ? `, aggregate ${((n * best(cpu, 1)) / c).toFixed(2)}x cpu ${((n * median(wall, 1)) / w).toFixed(2)}x wall` : '';
    console.log(`${kind.padEnd(6)} n=${String(n).padStart(2)}  cpu ${c.toFixed(3)} ms (${(c / best(cpu, 1)).toFixed(2)}x n=1)  wall ${w.toFixed(3)} ms (${(w / median(wall, 1)).toFixed(2)}x n=1)${agg}`);
  }
}
model.dispose();
