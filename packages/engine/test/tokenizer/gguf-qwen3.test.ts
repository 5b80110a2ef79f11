/** Qwen3's own tokenizer.json through a GGUF written by our converter gives the same ids (see families.ts). */
import { describeGgufFamily } from './families.js';

describeGgufFamily('qwen3', { pre: 'qwen2', model: 'gpt2', addBos: false });
