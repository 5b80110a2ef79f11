/**
 * Child process of memory.test.ts: loads one whole model on the WASM backend and prints, as JSON, the
 * resident set size around the load (after a full GC each time, so transient read buffers are gone)
 * and the bytes the loaded weights occupy.
 *   node --expose-gc --import tsx rss-child.ts MODEL_PATH
 */
import { createWasmBackend, loadModelConfig, loadShard } from '../../src/index.js';
import { layerMatrices } from '../../src/model/weights.js';

const path = process.argv[2];
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with --expose-gc');
const config = loadModelConfig(path);
const backend = createWasmBackend({ threads: 1 });
gc();
const before = process.memoryUsage().rss;
const shard = loadShard(path, { layers: [0, config.numLayers], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend, maxBatch: 1, maxSeqLen: 64 });
gc();
const after = process.memoryUsage().rss;
const w = shard.weights;
const matrices = [...w.layers.flatMap(layerMatrices), w.embed!, ...(w.head && w.head !== w.embed ? [w.head] : [])];
const weightBytes = matrices.reduce((s, m) => s + m.bytes.byteLength, 0);
process.stdout.write(`${JSON.stringify({ before, after, weightBytes, dtypes: [...new Set(matrices.map((m) => m.dtype))], arena: backend.usedBytes() })}\n`);
shard.dispose();
