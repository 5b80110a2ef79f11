/**
 * llama.cpp, through node-llama-cpp's prebuilt CPU build, as an independent reference for Orchard's
 * engine: load a GGUF, ask for next-token probabilities and greedy continuations of token-id
 * sequences. Token ids go in and come out as they are (no tokenizer on this path), so a comparison
 * tests the forward pass alone.
 *
 * Determinism and precision: we never let node-llama-cpp pick threads, GPU or build (`gpu: false`,
 * `build: 'never'`, explicit `threads`), and the KV cache is F32 by default (llama.cpp's default F16
 * cache alone moves probabilities by ~1e-3 on random weights). Flash attention is off.
 */
import { getLlama } from 'node-llama-cpp';

let llamaPromise = null;

/** One shared llama.cpp runtime per process (loading the native addon is the slow part). */
function runtime() {
  llamaPromise ??= getLlama({ gpu: false, build: 'never', logLevel: 'error', progressLogs: false, skipDownload: true });
  return llamaPromise;
}

/**
 * Opens `ggufPath`. Options: `threads` (default 1), `contextSize` (default 256 tokens),
 * `kvCacheType` ('F32' default, or 'F16' as llama.cpp's default).
 */
export async function openOracle(ggufPath, options = {}) {
  const threads = options.threads ?? 1;
  const contextSize = options.contextSize ?? 256;
  const kvCacheType = options.kvCacheType ?? 'F32';
  const llama = await runtime();
  const model = await llama.loadModel({ modelPath: ggufPath, gpuLayers: 0, useMmap: true });
  let context;
  try {
    context = await model.createContext({
      contextSize,
      batchSize: contextSize,
      sequences: 1,
      threads,
      flashAttention: false,
      experimentalKvCacheKeyType: kvCacheType,
      experimentalKvCacheValueType: kvCacheType,
    });
  } catch (err) {
    await model.dispose();
    throw err;
  }
  const sequence = context.getSequence();
  const vocabSize = model.tokens.count ?? model.fileInfo?.metadata?.tokenizer?.ggml?.tokens?.length;

  async function fresh() {
    await sequence.clearHistory();
  }

  return {
    model,
    context,
    vocabSize,

    /**
     * Next-token probabilities (softmax of llama.cpp's logits, full vocabulary) after each prefix
     * `tokens[0..i]` for i in `at` (default: only the whole sequence). Returns Float32Array per index.
     */
    async nextTokenProbabilities(tokens, at = [tokens.length - 1]) {
      if (tokens.length > contextSize) throw new Error(`oracle: ${tokens.length} tokens exceed context ${contextSize}`);
      await fresh();
      const want = new Set(at);
      const input = tokens.map((t, i) => (want.has(i) ? [t, { generateNext: { probabilities: true } }] : t));
      const results = await sequence.controlledEvaluate(input);
      return at.map((i) => {
        const probs = results[i]?.next?.probabilities;
        if (!probs) throw new Error(`oracle: no probabilities returned at index ${i}`);
        const out = new Float32Array(vocabSize);
        for (const [id, p] of probs) out[id] = p;
        return out;
      });
    },

    /**
     * `count` greedy (argmax) tokens continuing `tokens`. Token by token through controlledEvaluate:
     * node-llama-cpp's evaluate() stops at end-of-generation tokens (llama.cpp treats `<|im_end|>`
     * and friends as such by name), and the comparison wants exactly `count` tokens.
     */
    async greedy(tokens, count) {
      if (tokens.length + count > contextSize) throw new Error(`oracle: ${tokens.length}+${count} tokens exceed context ${contextSize}`);
      await fresh();
      const out = [];
      let input = tokens.slice(0, -1);
      let last = tokens[tokens.length - 1];
      while (out.length < count) {
        const results = await sequence.controlledEvaluate([...input, [last, { generateNext: { token: true, options: { temperature: 0 } } }]]);
        const next = results[input.length]?.next?.token;
        if (next == null) throw new Error(`oracle: llama.cpp returned no token after ${tokens.length + out.length} tokens`);
        out.push(next);
        input = [];
        last = next;
      }
      return out;
    },

    async dispose() {
      await context.dispose();
      await model.dispose();
    },
  };
}
