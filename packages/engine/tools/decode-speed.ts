/**
 * Decode and prefill speed of the engine on a model directory, or on a random model of the demo
 * model's shape when none is given. Prints tokens/s for the reference backend and, as a ratio against
 * it measured in the same run, the WASM backend.
 *
 *   pnpm exec tsx packages/engine/tools/decode-speed.ts [MODEL_DIR] [--tokens N] [--threads N]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createReferenceBackend, createWasmBackend, generate, loadInProcessModel, type Backend } from '../src/index.js';
import { writeRandomModel } from '../src/testing/index.js';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { tokens: { type: 'string', default: '128' }, threads: { type: 'string', default: '1' } } });
const tokens = Number(values.tokens);
let dir = positionals[0];
let cleanup = () => {};
if (!dir) {
  const tmp = mkdtempSync(join(tmpdir(), 'orchard-speed-'));
  cleanup = () => rmSync(tmp, { recursive: true, force: true });
  dir = join(tmp, 'model');
  writeRandomModel(dir, { hiddenSize: 192, numLayers: 4, numHeads: 6, numKvHeads: 3, intermediateSize: 512, dtype: 'f16', maxPositionEmbeddings: 512 });
  console.log('random model: dim 192, 4 layers, 6 heads / 3 KV, FFN 512, byte vocab, F16');
}

async function measure(name: string, backend: () => Backend): Promise<number> {
  const model = loadInProcessModel(dir, { backend });
  const prompt = Array.from({ length: 64 }, (_, i) => 65 + (i % 26));
  let best = { decode: 0, prefill: 0 };
  for (let rep = 0; rep < 3; rep++) {
    const r = await generate(model, prompt, { maxTokens: tokens, stopTokenIds: [] });
    best = { decode: Math.max(best.decode, r.tokensPerSecond), prefill: Math.max(best.prefill, (prompt.length * 1000) / r.prefillMs) };
  }
  model.dispose();
  console.log(`${name}: decode ${best.decode.toFixed(0)} tokens/s, prefill ${best.prefill.toFixed(0)} tokens/s (best of 3)`);
  return best.decode;
}

const ref = await measure('reference (plain TypeScript, 1 thread)', createReferenceBackend);
const threads = Number(values.threads);
const wasm = await measure(`wasm (${threads} thread${threads > 1 ? 's' : ''})`, () => createWasmBackend({ threads }));
console.log(`wasm / reference decode: ${(wasm / ref).toFixed(2)}x`);
cleanup();
