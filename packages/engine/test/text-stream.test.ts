/**
 * TextStream decodes incrementally (a window of the last tokens): every push must give what decoding
 * all ids each time gave — the pieces, the stop, the held-back text — on real vocabularies (byte-level
 * BPE, SentencePiece with byte fallback, o200k), the bundled byte model, and id sequences no model would
 * write (orphan UTF-8 bytes, special tokens mid-text).
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadTokenizer, TextStream } from '../src/index.js';
import { Prng } from '../src/numeric/prng.js';
import { lenmlDir, vocabSizeOf } from './tokenizer/families.js';
import { ALL_STRINGS } from './tokenizer/strings.js';

/** The stream before it was incremental: the whole text decoded at every push (the oracle). */
class FullDecodeStream {
  readonly #ids: number[] = [];
  #emitted = 0;
  stoppedText: string | null = null;
  constructor(
    readonly decode: (ids: number[]) => string,
    readonly stops: string[],
  ) {}
  push(id: number): { text: string; stopped: boolean } {
    this.#ids.push(id);
    let full = this.decode(this.#ids);
    let stopAt = -1;
    for (const s of this.stops) {
      const i = full.indexOf(s, Math.max(0, this.#emitted - s.length));
      if (i >= 0 && (stopAt < 0 || i < stopAt)) stopAt = i;
    }
    if (stopAt >= 0) {
      this.stoppedText = full.slice(0, stopAt);
      const text = full.slice(this.#emitted, stopAt);
      this.#emitted = stopAt;
      return { text, stopped: true };
    }
    let end = full.length;
    while (end > this.#emitted && full.charCodeAt(end - 1) === 0xfffd) end--;
    full = full.slice(0, end);
    let hold = 0;
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, full.length); k > hold; k--) {
        if (full.endsWith(s.slice(0, k))) {
          hold = k;
          break;
        }
      }
    }
    end = Math.max(this.#emitted, full.length - hold);
    const text = full.slice(this.#emitted, end);
    this.#emitted = end;
    return { text, stopped: false };
  }
  flush(): string {
    if (this.stoppedText !== null) return '';
    const full = this.decode(this.#ids);
    const text = full.slice(this.#emitted);
    this.#emitted = full.length;
    return text;
  }
}

/** Both streams fed `ids` until one stops: every push's result, the flush and the final text equal. */
function expectSame(decode: (ids: number[]) => string, ids: number[], stops: string[]): void {
  const a = new TextStream(decode, stops);
  const b = new FullDecodeStream(decode, stops);
  for (let i = 0; i < ids.length; i++) {
    const got = a.push(ids[i]);
    const want = b.push(ids[i]);
    if (got.text !== want.text || got.stopped !== want.stopped) throw new Error(`push ${i} (id ${ids[i]}): got ${JSON.stringify(got)}, full decode gives ${JSON.stringify(want)}`);
    if (got.stopped) break;
  }
  expect(a.flush()).toBe(b.flush());
  expect(a.stoppedText).toBe(b.stoppedText);
}

const DEMO = join(dirname(fileURLToPath(import.meta.url)), '../../../models/orchard-demo');
const vocabularies = [
  { name: 'orchard-demo (byte tokens)', dir: () => DEMO },
  { name: 'qwen3 (byte-level BPE)', dir: () => lenmlDir('qwen3') },
  { name: 'llama3_1 (byte-level BPE)', dir: () => lenmlDir('llama3_1') },
  { name: 'llama2 (SentencePiece, byte fallback)', dir: () => lenmlDir('llama2') },
  { name: 'gptoss (o200k)', dir: () => lenmlDir('gptoss') },
];

describe('TextStream decodes incrementally, as decoding every id each time did', () => {
  for (const v of vocabularies) {
    it(v.name, () => {
      const tok = loadTokenizer(v.dir());
      const text = ALL_STRINGS.join('\n');
      const ids = tok.encode(text);
      const size = vocabSizeOf(JSON.parse(readFileSync(join(v.dir(), 'tokenizer.json'), 'utf8')));
      const rng = new Prng(7);
      const random = Array.from({ length: 400 }, () => Math.floor(rng.next() * size));
      for (const skipSpecialTokens of [true, false]) {
        const decode = (t: number[]) => tok.decode(t, { skipSpecialTokens });
        expectSame(decode, ids, []);
        expectSame(decode, ids, ['\n\n', ' the']);
        expectSame(decode, random, []);
        expectSame(decode, random, ['e ']);
      }
    });
  }
});
