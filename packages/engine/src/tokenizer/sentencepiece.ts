/**
 * A SentencePiece BPE vocabulary (pieces, scores, types: llama.cpp's `llama` tokenizer model, and
 * the tokenizer.model of Llama 2 / Mistral / TinyLlama) as an equivalent Hugging Face tokenizer.json,
 * the way transformers' SpmConverter builds one: spaces become "▁" (with one put in front when
 * add_space_prefix), pieces merge by score, and characters outside the vocabulary fall back to their
 * `<0xNN>` byte tokens.
 *
 * Merges: llama.cpp merges the adjacent pair whose concatenation is the highest-scored piece. The
 * same order as BPE merges is every split of a piece into two pieces, ranked by the piece's score
 * (ties: lower id first).
 */

/** llama.cpp token types (tokenizer.ggml.token_type). */
export const SPM_TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const;

export interface SentencePieceVocabulary {
  pieces: readonly string[];
  scores: ArrayLike<number>;
  /** llama.cpp token types; NORMAL when absent. */
  types?: ArrayLike<number>;
  /** Put "▁" before the text (SentencePiece's add_dummy_prefix). */
  addSpacePrefix: boolean;
  unkId?: number;
}

/** Merges in rank order ("a b"), from the pieces' scores. */
export function mergesFromScores(pieces: readonly string[], scores: ArrayLike<number>, types?: ArrayLike<number>): string[] {
  const ids = new Map<string, number>();
  pieces.forEach((p, id) => {
    if (!ids.has(p)) ids.set(p, id);
  });
  const found: { left: string; right: string; score: number; id: number; split: number }[] = [];
  pieces.forEach((piece, id) => {
    const type = types?.[id] ?? SPM_TOKEN_TYPE.NORMAL;
    if (type !== SPM_TOKEN_TYPE.NORMAL && type !== SPM_TOKEN_TYPE.USER_DEFINED) return;
    const chars = Array.from(piece);
    for (let i = 1; i < chars.length; i++) {
      const left = chars.slice(0, i).join('');
      const right = chars.slice(i).join('');
      if (ids.has(left) && ids.has(right)) found.push({ left, right, score: scores[id], id, split: ids.get(left)! });
    }
  });
  found.sort((a, b) => b.score - a.score || a.id - b.id || a.split - b.split);
  return found.map((m) => `${m.left} ${m.right}`);
}

/** The tokenizer.json of a SentencePiece vocabulary; CONTROL and USER_DEFINED pieces become added tokens. */
export function sentencePieceTokenizerJson(v: SentencePieceVocabulary): Record<string, unknown> {
  const vocab: Record<string, number> = {};
  const added: Record<string, unknown>[] = [];
  v.pieces.forEach((piece, id) => {
    const type = v.types?.[id] ?? SPM_TOKEN_TYPE.NORMAL;
    if (type === SPM_TOKEN_TYPE.CONTROL || type === SPM_TOKEN_TYPE.USER_DEFINED || type === SPM_TOKEN_TYPE.UNKNOWN) {
      added.push({ id, content: piece, single_word: false, lstrip: false, rstrip: false, normalized: false, special: type !== SPM_TOKEN_TYPE.USER_DEFINED });
    }
    if (!(piece in vocab)) vocab[piece] = id;
  });
  const unk = v.unkId !== undefined && v.pieces[v.unkId] !== undefined ? v.pieces[v.unkId] : null;
  const normalizers: Record<string, unknown>[] = [];
  if (v.addSpacePrefix) normalizers.push({ type: 'Prepend', prepend: '▁' });
  normalizers.push({ type: 'Replace', pattern: { String: ' ' }, content: '▁' });
  const decoders: Record<string, unknown>[] = [{ type: 'Replace', pattern: { String: '▁' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' }];
  if (v.addSpacePrefix) decoders.push({ type: 'Strip', content: ' ', start: 1, stop: 0 });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: { type: 'Sequence', normalizers },
    pre_tokenizer: null,
    post_processor: null,
    decoder: { type: 'Sequence', decoders },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: unk,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: true,
      byte_fallback: true,
      ignore_merges: false,
      vocab,
      merges: mergesFromScores(v.pieces, v.scores, v.types),
    },
  };
}
