/** Messages between the daemon and an embedding process (serving/embedder.ts ↔ serving/embed-main.ts). */
export type ToEmbedder =
  | { type: 'load'; dir: string; backend: 'reference' | 'wasm'; threads: number; maxSeqLen: number }
  | { type: 'embed'; id: number; inputs: (string | number[])[]; truncate: boolean };

export type FromEmbedder =
  | { type: 'loaded'; dims: number; pooling: string; maxSeqLen: number }
  | { type: 'load-failed'; message: string }
  | { type: 'embedded'; id: number; vectors: number[][]; tokens: number }
  | { type: 'embed-failed'; id: number; status: number; message: string };
