/**
 * A SentencePiece `tokenizer.model` (a serialized sentencepiece ModelProto) read into a
 * SentencePieceVocabulary. Only what tokenizing needs is read: the pieces (text, score, type), the
 * trainer's model_type (BPE only: Unigram models tokenize differently and are refused) and the
 * normalizer's add_dummy_prefix. Normalization rules other than identity (nmt_nfkc's precompiled
 * charsmap) are refused too, since the tokenizer.json we build would not apply them.
 */
import type { SentencePieceVocabulary } from './sentencepiece.js';

type Field = { field: number; wire: number; varint: bigint; bytes: Uint8Array<ArrayBufferLike> };

/** The top-level fields of a protobuf message. */
function* fields(buf: Uint8Array<ArrayBufferLike>): Generator<Field> {
  let p = 0;
  const varint = (): bigint => {
    let x = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (p >= buf.length) throw new Error('truncated varint');
      const c = buf[p++];
      x |= BigInt(c & 0x7f) << shift;
      if (!(c & 0x80)) return x;
    }
  };
  while (p < buf.length) {
    const key = varint();
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    let v = 0n;
    let bytes: Uint8Array<ArrayBufferLike> = new Uint8Array(0);
    if (wire === 0) v = varint();
    else if (wire === 1 || wire === 5) {
      const n = wire === 1 ? 8 : 4;
      bytes = buf.subarray(p, p + n);
      p += n;
    } else if (wire === 2) {
      const n = Number(varint());
      bytes = buf.subarray(p, p + n);
      p += n;
    } else throw new Error(`unsupported wire type ${wire}`);
    if (p > buf.length) throw new Error('truncated field');
    yield { field, wire, varint: v, bytes };
  }
}

const MODEL_TYPE_BPE = 2;
/** sentencepiece's SentencePiece.Type numbers are llama.cpp's token types. */
const NORMAL = 1;

/** Parses `tokenizer.model` bytes. Errors say what is wrong; the caller names the file. */
export function parseSentencePieceModel(buf: Uint8Array): SentencePieceVocabulary {
  const pieces: string[] = [];
  const scores: number[] = [];
  const types: number[] = [];
  let modelType = 1; // sentencepiece's default: UNIGRAM
  let addDummyPrefix = true;
  let normalizer = 'identity';
  let removeExtraWhitespaces = false;
  let unkId: number | undefined;
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  for (const f of fields(buf)) {
    if (f.field === 1 && f.wire === 2) {
      let piece = '';
      let score = 0;
      let type = NORMAL;
      for (const g of fields(f.bytes)) {
        if (g.field === 1 && g.wire === 2) piece = utf8.decode(g.bytes);
        else if (g.field === 2 && g.wire === 5) score = new DataView(g.bytes.buffer, g.bytes.byteOffset, 4).getFloat32(0, true);
        else if (g.field === 3 && g.wire === 0) type = Number(g.varint);
      }
      if (type === 2 && unkId === undefined) unkId = pieces.length;
      pieces.push(piece);
      scores.push(score);
      types.push(type);
    } else if (f.field === 2 && f.wire === 2) {
      for (const g of fields(f.bytes)) if (g.field === 3 && g.wire === 0) modelType = Number(g.varint);
    } else if (f.field === 3 && f.wire === 2) {
      for (const g of fields(f.bytes)) {
        if (g.field === 1 && g.wire === 2) normalizer = utf8.decode(g.bytes);
        else if (g.field === 3 && g.wire === 0) addDummyPrefix = g.varint !== 0n;
        else if (g.field === 4 && g.wire === 0) removeExtraWhitespaces = g.varint !== 0n;
      }
    }
  }
  if (!pieces.length) throw new Error('no pieces (not a sentencepiece model?)');
  if (modelType !== MODEL_TYPE_BPE) throw new Error(`model_type ${modelType} is not BPE (2); only SentencePiece BPE vocabularies are read`);
  if (normalizer !== 'identity') throw new Error(`normalizer ${JSON.stringify(normalizer)} is not supported (identity only)`);
  if (removeExtraWhitespaces) throw new Error('remove_extra_whitespaces is not supported');
  return { pieces, scores, types, addSpacePrefix: addDummyPrefix, unkId };
}
