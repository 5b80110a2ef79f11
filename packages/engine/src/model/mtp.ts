/**
 * DeepSeek-V3 multi-token prediction (MTP): the checkpoint's layer `num_hidden_layers` (config
 * `num_nextn_predict_layers` = 1) is a decoder layer trained to predict one token further than the
 * model. Its row j takes the model's final hidden state at position j (h_j, after model.norm) and the
 * token at position j + 1, and predicts the token at j + 2:
 *
 *   x = eh_proj([enorm(embed(t_{j+1})), hnorm(h_j)])      (concatenated in that order: [hidden, 2·hidden])
 *   x = decoder_layer(x)  at position j, over its own KV cache
 *   logits = shared_head.head(shared_head.norm(x))
 *
 * (the layer as vLLM and SGLang run it; DeepSeek's embed_tokens / shared_head.head copies are read
 * from the MTP layer, so the model's own are not needed). Used as a drafter: the draft for the token
 * after next costs one decoder layer instead of a whole forward. Safetensors checkpoints, whole layer,
 * one process (no tensor split); a GGUF or a checkpoint without the layer gets a clear error.
 */
import type { ModelConfig } from '../config/config.js';
import { UnsupportedModelError } from '../errors.js';
import type { Backend, Weight } from '../kernels/backend.js';
import { createReferenceBackend } from '../kernels/reference.js';
import { isGgufPath, loadModelConfig, openWeights } from '../format/model-files.js';
import { embedRows } from './embedding.js';
import { loadShard, type KVCache, type ModelShard } from './forward.js';
import { rmsnorm } from './math.js';
import { readPlanSync, WeightPlanner } from './weight-planner.js';

export interface MtpHeadOptions {
  /** @default the reference backend */
  backend?: Backend;
  /** Most rows per forward. @default 32 */
  maxBatch?: number;
  maxSeqLen?: number;
}

export interface MtpOutput {
  /** [n, vocab]: row j's prediction of the token at j + 2. */
  logits: Float32Array;
  /** [n, hidden]: the layer's output before shared_head.norm (a stand-in for h_{j+1} when drafting further). */
  hidden: Float32Array;
}

export class MtpHead {
  readonly config: ModelConfig;
  /** Index of the MTP layer in the checkpoint (num_hidden_layers). */
  readonly layer: number;
  readonly block: ModelShard;
  readonly #backend: Backend;
  readonly #embed: Weight;
  readonly #enorm: Float32Array;
  readonly #hnorm: Float32Array;
  readonly #eh: Weight;
  readonly #headNorm: Float32Array;
  readonly #head: Weight;
  // Run buffers (the backend's memory: its kernels read only that).
  readonly #cat: Float32Array;
  readonly #x: Float32Array;
  readonly #normed: Float32Array;
  readonly #logits: Float32Array;

  private constructor(config: ModelConfig, layer: number, block: ModelShard, backend: Backend, w: { embed: Weight; enorm: Float32Array; hnorm: Float32Array; eh: Weight; headNorm: Float32Array; head: Weight }) {
    this.config = config;
    this.layer = layer;
    this.block = block;
    this.#backend = backend;
    this.#embed = w.embed;
    this.#enorm = w.enorm;
    this.#hnorm = w.hnorm;
    this.#eh = w.eh;
    this.#headNorm = w.headNorm;
    this.#head = w.head;
    const B = block.maxBatch;
    const D = config.hiddenSize;
    this.#cat = backend.allocF32(B * 2 * D);
    this.#x = backend.allocF32(B * D);
    this.#normed = backend.allocF32(B * D);
    this.#logits = backend.allocF32(B * config.vocabSize);
  }

  /** Loads the first MTP layer of the checkpoint in `dir`. */
  static load(dir: string, options: MtpHeadOptions = {}): MtpHead {
    if (isGgufPath(dir)) throw new UnsupportedModelError(`${dir}: multi-token-prediction layers are read from safetensors checkpoints only`);
    const config = loadModelConfig(dir);
    const L = config.numLayers;
    const p = `model.layers.${L}`;
    const ckpt = openWeights(dir, config);
    const backend = options.backend ?? createReferenceBackend();
    try {
      if (!ckpt.has(`${p}.eh_proj.weight`)) {
        throw new UnsupportedModelError(`${dir}: no multi-token-prediction layer (${p}.eh_proj.weight is not in the checkpoint; DeepSeek-V3 checkpoints with num_nextn_predict_layers >= 1 have it)`);
      }
      const D = config.hiddenSize;
      const V = config.vocabSize;
      const rd = new WeightPlanner(ckpt, backend, config.weightQuant);
      const w = {
        embed: rd.matrix(ckpt.has(`${p}.embed_tokens.weight`) ? `${p}.embed_tokens.weight` : 'model.embed_tokens.weight', V, D, [0, V], [0, D], false),
        enorm: rd.vector(`${p}.enorm.weight`, D),
        hnorm: rd.vector(`${p}.hnorm.weight`, D),
        eh: rd.matrix(`${p}.eh_proj.weight`, D, 2 * D, [0, D]),
        headNorm: rd.vector(`${p}.shared_head.norm.weight`, D),
        head: rd.matrix(`${p}.shared_head.head.weight`, V, D, [0, V]),
      };
      readPlanSync(rd.reads);
      // The layer is one more decoder layer to the shard loader; sparse when the checkpoint gives it experts.
      const sparse = ckpt.has(`${p}.mlp.gate.weight`);
      if (sparse && !config.moe) throw new UnsupportedModelError(`${dir}: ${p} has experts but config.json describes no mixture of experts`);
      const blockConfig: ModelConfig = { ...config, numLayers: L + 1, ...(config.moe ? { moe: { ...config.moe, sparse: [...config.moe.sparse, sparse] } } : {}) };
      const block = loadShard(dir, { layers: [L, L + 1], tensor: { rank: 0, size: 1 }, embed: false, head: false }, { config: blockConfig, backend, maxBatch: options.maxBatch, maxSeqLen: options.maxSeqLen });
      return new MtpHead(config, L, block, backend, w);
    } catch (err) {
      if (!options.backend) backend.dispose?.();
      throw err;
    } finally {
      ckpt.close();
    }
  }

  newCache(capacity?: number): KVCache {
    return this.block.newCache(capacity);
  }

  releaseCache(cache: KVCache): void {
    this.block.releaseCache(cache);
  }

  /**
   * Rows j .. j+n-1 (j = cache.length): `hidden` holds the model's final hidden states there ([n, hidden],
   * after model.norm) and `tokens` the tokens one position later. The arrays returned are this head's
   * buffers, valid until the next forward.
   */
  async forward(hidden: Float32Array, tokens: ArrayLike<number>, cache: KVCache): Promise<MtpOutput> {
    const n = tokens.length;
    const D = this.config.hiddenSize;
    const V = this.config.vocabSize;
    if (n < 1 || n > this.block.maxBatch) throw new RangeError(`MTP forward: ${n} rows; this head takes 1..${this.block.maxBatch}`);
    if (hidden.length < n * D) throw new RangeError(`MTP forward: ${hidden.length} hidden values for ${n} rows of ${D}`);
    for (let b = 0; b < n; b++) {
      const t = tokens[b];
      if (!Number.isInteger(t) || t < 0 || t >= V) throw new RangeError(`MTP forward: token id ${t} is outside the vocabulary 0..${V - 1}`);
    }
    const eps = this.config.rmsNormEps;
    const cat = this.#cat;
    const x = this.#x;
    // Embeddings into x (scratch), then each row's [enorm(e), hnorm(h)] side by side.
    embedRows(x, this.#embed, tokens);
    for (let b = 0; b < n; b++) {
      rmsnorm(cat, b * 2 * D, x, b * D, this.#enorm, D, eps);
      rmsnorm(cat, b * 2 * D + D, hidden, b * D, this.#hnorm, D, eps);
    }
    this.#backend.matmul(x, this.#eh, cat, n);
    const [out] = await this.block.forwardBatch([{ input: { hidden: x, n }, cache }]);
    for (let b = 0; b < n; b++) rmsnorm(this.#normed, b * D, out, b * D, this.#headNorm, D, eps);
    this.#backend.matmul(this.#logits, this.#head, this.#normed, n);
    return { logits: this.#logits.subarray(0, n * V), hidden: out.subarray(0, n * D) };
  }

  dispose(): void {
    this.block.dispose();
  }
}
