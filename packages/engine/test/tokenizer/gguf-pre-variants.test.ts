/**
 * The other `tokenizer.ggml.pre` splits, on a real vocabulary prefix (variants.ts) under the
 * pre_tokenizer each family's tokenizer.json has. Our converter must name the pre llama.cpp uses,
 * and the GGUF read back must give tokenizer.json's ids. An unknown pre is refused by name.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { gguf, writeGguf } from '../../src/gguf/write.js';
import { loadTokenizer } from '../../src/format/tokenizer.js';
import { tempDir } from '../helpers.js';
import { expectSameIds, metaValue, writeTokenizerGguf } from './families.js';
import { KEEP, VARIANTS, byteLevel, split, writeVariant } from './variants.js';
import { ALL_STRINGS } from './strings.js';

const tmp = tempDir('gguf-pre-variants');
afterAll(tmp.cleanup);

/**
 * @huggingface/tokenizers' Digits step splits at [0-9] only; the Rust tokenizers (is_numeric) and
 * llama.cpp (\p{N}) at every number character: strings with other ones ("½") are left out where
 * tokenizer.json has a Digits step.
 */
const otherNumber = /(?![0-9])\p{N}/u;

describe.each(VARIANTS)('pre $pre', ({ pre, ignoreMerges, preTokenizer }) => {
  it('is named by the converter and tokenizes like tokenizer.json', () => {
    const dir = writeVariant(tmp.dir, pre, preTokenizer, ignoreMerges);
    const file = join(tmp.dir, `${pre}.gguf`);
    expect(metaValue(writeTokenizerGguf(dir, file, KEEP), 'tokenizer.ggml.pre')).toBe(pre);
    const digits = JSON.stringify(preTokenizer).includes('"Digits"');
    expectSameIds(loadTokenizer(dir), loadTokenizer(file), digits ? ALL_STRINGS.filter((s) => !otherNumber.test(s)) : ALL_STRINGS);
  });
});

describe('pre-tokenizers we cannot name or read', () => {
  it('refuses to convert a split llama.cpp has no name for', () => {
    const dir = writeVariant(tmp.dir, 'unnamed', { type: 'Sequence', pretokenizers: [split(String.raw`\p{L}+`), byteLevel(false)] }, false);
    expect(() => writeTokenizerGguf(dir, join(tmp.dir, 'unnamed.gguf'), KEEP)).toThrow(/pre_tokenizer is not one llama.cpp names/);
  });

  it('refuses a GGUF whose tokenizer.ggml.pre is unknown, naming it', () => {
    const file = join(tmp.dir, 'unknown-pre.gguf');
    writeGguf(
      file,
      {
        'general.architecture': gguf.str('llama'),
        'tokenizer.ggml.model': gguf.str('gpt2'),
        'tokenizer.ggml.pre': gguf.str('no-such-pre'),
        'tokenizer.ggml.tokens': gguf.arr('STRING', ['a', 'b']),
        'tokenizer.ggml.merges': gguf.arr('STRING', []),
      },
      [],
    );
    expect(() => loadTokenizer(file)).toThrow(/tokenizer\.ggml\.pre "no-such-pre" is not a pre-tokenizer we know/);
  });
});
