/** DeepSeek V3's own tokenizer.json through a GGUF written by our converter gives the same ids (see families.ts). */
import { describeGgufFamily } from './families.js';

describeGgufFamily('deepseek_v3', { pre: 'deepseek-v3', model: 'gpt2', addBos: true });
