/** Proof 3: the byte-level tokenizer.json the tests write loads through @huggingface/tokenizers, round-trips, and gives the reference ids. */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadTokenizer } from '../src/index.js';
import { byteToUnicode, writeRandomModel } from '../src/testing/index.js';
import { tempDir } from './helpers.js';

const tmp = tempDir('tokenizer');
afterAll(tmp.cleanup);
const model = writeRandomModel(join(tmp.dir, 'm'), { numLayers: 1 });
const tok = loadTokenizer(model.dir);

describe('byte-level tokenizer', () => {
  const samples = ['', 'In the beginning God created the heaven and the earth.', '  leading and  double  spaces\n\ttabs\r\n', 'naïve café — 東京 🍎🍏', '\u0000\u007f\u00ff control', "it's <not> a special token"];

  it.each(samples)('encodes %j to its UTF-8 bytes and decodes back', (text) => {
    const ids = tok.encode(text);
    expect(ids).toEqual([...Buffer.from(text, 'utf8')]);
    expect(tok.decode(ids)).toBe(text);
  });

  it('maps special tokens to their ids and drops them when decoding by default', () => {
    expect(tok.encode('<|im_start|>user\nhi<|im_end|><|endoftext|>')).toEqual([257, ...Buffer.from('user\nhi'), 258, 256]);
    expect(tok.decode([104, 105, 256])).toBe('hi');
    expect(tok.decode([104, 105, 256], { skipSpecialTokens: false })).toBe('hi<|endoftext|>');
  });

  it('uses GPT-2 byte-to-unicode as vocabulary (printable bytes map to themselves)', () => {
    const table = byteToUnicode();
    expect(new Set(table).size).toBe(256);
    expect(table[65]).toBe('A');
    expect(table[32]).toBe('Ġ');
    expect(table[10]).toBe('Ċ');
  });

  it('renders the chat template with @huggingface/jinja', () => {
    const text = tok.applyChatTemplate([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello?' },
    ]);
    expect(text).toBe('<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello?<|im_end|>\n<|im_start|>assistant\n');
    expect(tok.applyChatTemplate([{ role: 'user', content: 'x' }], { addGenerationPrompt: false })).toBe('<|im_start|>user\nx<|im_end|>\n');
  });
});
