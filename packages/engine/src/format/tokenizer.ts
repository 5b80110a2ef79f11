/** A model's tokenizer, whatever its file format: a GGUF's metadata or a directory's tokenizer files. */
import { isGgufPath } from '../gguf/read.js';
import { loadGgufTokenizer } from '../gguf/read-tokenizer.js';
import { loadTokenizer as loadDirectoryTokenizer, type ModelTokenizer } from '../tokenizer/load.js';

export function loadTokenizer(path: string): ModelTokenizer {
  return isGgufPath(path) ? loadGgufTokenizer(path) : loadDirectoryTokenizer(path);
}
