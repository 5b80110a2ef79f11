/** Llama 3.1's own tokenizer.json through a GGUF written by our converter gives the same ids (see families.ts). */
import { describeGgufFamily } from './families.js';

describeGgufFamily('llama3_1', { pre: 'llama-bpe', model: 'gpt2', addBos: true });
