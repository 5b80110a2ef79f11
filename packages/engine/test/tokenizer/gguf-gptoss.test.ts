/** gpt-oss (o200k)'s own tokenizer.json through a GGUF written by our converter gives the same ids (see families.ts). */
import { describeGgufFamily } from './families.js';

describeGgufFamily('gptoss', { pre: 'gpt-4o', model: 'gpt2', addBos: false });
