/**
 * Which tensors a pipeline stage needs: a node holding layers 20-39 of a model fetches only the
 * chunks that hold them (chunked/safetensors-layout.ts finds where they lie).
 */

export interface TensorSelection {
  /** Which layers' tensors to keep, plus the embedding and/or head. */
  layers: [number, number];
  embed: boolean;
  head: boolean;
  /** Tied embeddings: the head stage needs the embedding matrix as its LM head. */
  tiedEmbeddings?: boolean;
}

/** Tensor-name predicate for a pipeline stage, following Hugging Face's Llama-family names. */
export function stageTensorFilter(sel: TensorSelection): (name: string) => boolean {
  return (name) => {
    const m = /^model\.layers\.(\d+)\./.exec(name);
    if (m) {
      const i = Number(m[1]);
      return i >= sel.layers[0] && i < sel.layers[1];
    }
    if (name.startsWith('model.embed_tokens.')) return sel.embed || (sel.head && !!sel.tiedEmbeddings);
    if (name.startsWith('lm_head.') || name.startsWith('model.norm.')) return sel.head;
    // Anything else (rotary caches, vision towers...) is not needed by a text decoder stage.
    return false;
  };
}

/**
 * The same stage as a predicate on llama.cpp's tensor names (a GGUF file): `blk.N.` for layer N (its
 * stacked experts included), `token_embd.` the embedding, `output.` / `output_norm.` the head.
 */
export function ggufStageTensorFilter(sel: TensorSelection): (name: string) => boolean {
  return (name) => {
    const m = /^blk\.(\d+)\./.exec(name);
    if (m) {
      const i = Number(m[1]);
      return i >= sel.layers[0] && i < sel.layers[1];
    }
    if (name.startsWith('token_embd.')) return sel.embed || (sel.head && !!sel.tiedEmbeddings);
    if (name.startsWith('output.') || name.startsWith('output_norm.')) return sel.head;
    // rope_freqs and the like: small, and read by whichever stage needs them.
    return true;
  };
}
