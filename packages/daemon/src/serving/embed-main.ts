/**
 * One embedding process: loads a model whole on this node and answers embedding requests one at a
 * time, off the daemon's event loop (a forward over a long input would stall every stream). It exits
 * with its parent.
 */
import { createReferenceBackend, createWasmBackend, embedTokens, loadModelConfig, loadShard, loadTokenizer, readEmbeddingConfig, type EmbeddingConfig, type ModelShard, type ModelTokenizer } from '@orchard/engine';
import type { FromEmbedder, ToEmbedder } from './embed-protocol.js';

const send = (m: FromEmbedder): void => void process.send!(m);
let model: { shard: ModelShard; tokenizer: ModelTokenizer; cfg: EmbeddingConfig; maxSeqLen: number } | null = null;
let queue: Promise<void> = Promise.resolve();

function load(m: Extract<ToEmbedder, { type: 'load' }>): void {
  try {
    const cfg = readEmbeddingConfig(m.dir);
    const backend = m.backend === 'wasm' ? createWasmBackend({ threads: m.threads }) : createReferenceBackend();
    const config = loadModelConfig(m.dir);
    const maxSeqLen = Math.min(m.maxSeqLen, config.maxPositionEmbeddings);
    const shard = loadShard(m.dir, { layers: [0, config.numLayers], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend, config, maxSeqLen, maxBatch: 64 });
    model = { shard, tokenizer: loadTokenizer(m.dir), cfg, maxSeqLen: shard.maxSeqLen };
    send({ type: 'loaded', dims: shard.config.hiddenSize, pooling: cfg.pooling, maxSeqLen: shard.maxSeqLen });
  } catch (err) {
    send({ type: 'load-failed', message: (err as Error).message });
  }
}

async function embed(m: Extract<ToEmbedder, { type: 'embed' }>): Promise<void> {
  const { shard, tokenizer, cfg, maxSeqLen } = model!;
  const vectors: number[][] = [];
  let tokens = 0;
  for (const [i, input] of m.inputs.entries()) {
    let ids = typeof input === 'string' ? tokenizer.encode(input) : input;
    if (ids.length > maxSeqLen) {
      if (!m.truncate) return send({ type: 'embed-failed', id: m.id, status: 400, message: `input[${i}] is ${ids.length} tokens; this model embeds at most ${maxSeqLen}` });
      ids = ids.slice(0, maxSeqLen);
    }
    try {
      vectors.push(Array.from(await embedTokens(shard, ids, cfg)));
    } catch (err) {
      // The engine refuses an empty input or an id outside the vocabulary before any work: the caller's fault.
      if (err instanceof RangeError) return send({ type: 'embed-failed', id: m.id, status: 400, message: `input[${i}]: ${err.message}` });
      throw err;
    }
    tokens += ids.length;
  }
  send({ type: 'embedded', id: m.id, vectors, tokens });
}

process.on('message', (m: ToEmbedder) => {
  if (m.type === 'load') return load(m);
  queue = queue.then(() => embed(m)).catch((err: Error) => send({ type: 'embed-failed', id: m.id, status: 500, message: err.message }));
});
process.on('disconnect', () => process.exit(0));
