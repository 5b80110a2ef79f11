/** Proof 3: the byte-level tokenizer.json the tests write loads through @huggingface/tokenizers, round-trips, and gives the reference ids. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadTokenizer } from '../src/index.js';
import { buildByteLevelTokenizer, byteToUnicode, writeRandomModel } from '../src/testing/index.js';
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

  it('renders a Llama-3-style template with bos_token, trim and raise_exception, from the list form of chat_template', () => {
    const llama3 =
      "{%- if messages[0]['role'] == 'tool' %}{{ raise_exception('no tools') }}{%- endif %}" +
      '{{- bos_token }}{% for message in messages %}' +
      "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}" +
      "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
    const files = buildByteLevelTokenizer({
      specialTokens: ['<|begin_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>'],
      eosToken: '<|eot_id|>',
      chatTemplate: null,
    });
    const dir = join(tmp.dir, 'llama3-template');
    mkdirSync(dir);
    writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(files.tokenizer));
    const config = { ...files.tokenizerConfig, bos_token: '<|begin_of_text|>', chat_template: [{ name: 'default', template: llama3 }] };
    writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(config));
    const t = loadTokenizer(dir);
    const text = t.applyChatTemplate([{ role: 'user', content: '  Hi there \n' }]);
    expect(text).toBe('<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n');
    expect(t.encode(text).slice(0, 3)).toEqual([256, 258, ...Buffer.from('u')]);
    expect(() => t.applyChatTemplate([{ role: 'tool', content: 'x' }])).toThrow(/no tools/);
  });
});
