/**
 * `pnpm bench:serve`: decode tokens/s of one generated model (tens of millions of parameters) served
 * by runner processes over the loopback TCP data plane, in one run:
 *   - one process (the baseline),
 *   - a 2-stage pipeline on 2 processes,
 *   - tensor parallel 2 on 2 processes,
 * each runner with 1 engine thread (wasm SIMD kernels; BENCH_BACKEND=reference for the plain ones). Prints ratios against the baseline.
 * Targets (issue 6): pipeline >= 0.9x single, tensor parallel >= 1.7x single.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pipelineStages } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { startLocalInstance } from '../src/runner/runner-process.js';
import type { InstanceLayout } from '../src/runner/layout.js';

const LAYERS = Number(process.env.BENCH_LAYERS ?? 8);
const HIDDEN = Number(process.env.BENCH_HIDDEN ?? 512);
const TOKENS = Number(process.env.BENCH_TOKENS ?? 48);
const BACKEND = (process.env.BENCH_BACKEND ?? 'wasm') as 'wasm' | 'reference';

const dir = mkdtempSync(join(os.tmpdir(), 'orchard-bench-serve-'));
const info = writeRandomModel(dir, { numLayers: LAYERS, hiddenSize: HIDDEN, intermediateSize: HIDDEN * 3, numHeads: 8, numKvHeads: 4, maxPositionEmbeddings: 512, seed: 11 });
const params = (LAYERS * (HIDDEN * HIDDEN * 3 + HIDDEN * HIDDEN * 3 * 3)) / 1e6;

async function measure(name: string, layout: InstanceLayout): Promise<number> {
  const runners = await startLocalInstance({ modelDir: dir, layout, groupId: `bench-${name}`, secret: '11'.repeat(16), listenHost: '127.0.0.1', maxSeqLen: 512, backend: { kind: BACKEND, threads: 1 } });
  try {
    const prompt = [1, 10, 20, 30, 40, 50, 60, 70];
    await runners[0].generate({ promptIds: prompt, maxTokens: 4, stopTokenIds: [] }, () => undefined); // warm-up
    let best = 0;
    for (let i = 0; i < 2; i++) {
      const out = await runners[0].generate({ promptIds: prompt, maxTokens: TOKENS, stopTokenIds: [] }, () => undefined);
      best = Math.max(best, ((out.tokens.length - 1) * 1000) / out.decodeMs);
    }
    return best;
  } finally {
    await Promise.all(runners.map((r) => r.stop(1000)));
  }
}

/**
 * Two independent single-process instances decoding at the same time: their combined speed over the
 * single baseline is what this machine can give two processes right now (the ceiling for tensor
 * parallel over 2 processes on one machine; ~2x on two idle cores, less when other work shares them).
 */
async function headroom(): Promise<number> {
  const layout = { stages: pipelineStages(LAYERS, 1), tensor: 1 };
  const a = await startLocalInstance({ modelDir: dir, layout, groupId: 'bench-ha', secret: '22'.repeat(16), listenHost: '127.0.0.1', maxSeqLen: 512, backend: { kind: BACKEND, threads: 1 } });
  const b = await startLocalInstance({ modelDir: dir, layout, groupId: 'bench-hb', secret: '33'.repeat(16), listenHost: '127.0.0.1', maxSeqLen: 512, backend: { kind: BACKEND, threads: 1 } });
  try {
    const prompt = [1, 10, 20, 30, 40, 50, 60, 70];
    const one = async (r: typeof a) => {
      const out = await r[0].generate({ promptIds: prompt, maxTokens: TOKENS, stopTokenIds: [] }, () => undefined);
      return ((out.tokens.length - 1) * 1000) / out.decodeMs;
    };
    const [x, y] = await Promise.all([one(a), one(b)]);
    return x + y;
  } finally {
    await Promise.all([...a, ...b].map((r) => r.stop(1000)));
  }
}

try {
  console.log(`bench:serve — generated Llama, ${LAYERS} layers, hidden ${HIDDEN}, ~${params.toFixed(1)}M layer parameters (${info.dir}), ${TOKENS} decode tokens, best of 2, ${BACKEND} backend with 1 engine thread per process`);
  console.log(`machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), load average ${os.loadavg()[0].toFixed(2)}`);
  const single = await measure('single', { stages: pipelineStages(LAYERS, 1), tensor: 1 });
  const pipe = await measure('pipeline', { stages: pipelineStages(LAYERS, 2), tensor: 1 });
  const tensor = await measure('tensor', { stages: pipelineStages(LAYERS, 1), tensor: 2 });
  const both = await headroom();
  const row = (name: string, v: number, target?: number) =>
    console.log(`${name.padEnd(44)} ${v.toFixed(1).padStart(7)} tok/s  ${(v / single).toFixed(2)}x single${target ? `  (target >= ${target}x: ${v / single >= target ? 'met' : 'NOT met'})` : ''}`);
  row('single process (1 thread)', single);
  row('2-stage pipeline, 2 processes', pipe, 0.9);
  row('tensor parallel 2, 2 processes x 1 thread', tensor, 1.7);
  row('(two independent singles at once, summed)', both);
  console.log('the last line is the parallel headroom this machine gave 2 processes during the run: tensor parallel cannot exceed it');
} finally {
  rmSync(dir, { recursive: true, force: true });
}
