import { openSync } from 'node:fs';
import { ModelFormatError } from './errors.js';

/** Opens a model file for reading; a file that cannot be opened is a ModelFormatError naming it and the errno code. */
export function openModelFile(path: string): number {
  try {
    return openSync(path, 'r');
  } catch (err) {
    throw new ModelFormatError(`cannot open ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, path);
  }
}
