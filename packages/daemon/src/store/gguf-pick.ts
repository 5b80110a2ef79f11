/**
 * Which file of a GGUF-only repo to pull: the quantisation named (`org/name:Q4_K_M`), else the best one
 * that fits — the largest file (more bits, closer to the original) among those whose tensor type the
 * engine loads, within the memory budget.
 */
import { GGUF_LOADABLE_TYPES } from '@orchard/engine';
import { StoreError } from './errors.js';
import type { HubFile } from './hub.js';

/** The quantisation in a GGUF file name: "Llama-3.2-1B-Instruct-Q4_K_M.gguf" → "Q4_K_M". */
export function ggufQuant(path: string): string | null {
  const m = /(?:^|[-_.])((?:I?Q\d(?:_[A-Z0-9]+)*)|BF16|F16|F32)(?=\.gguf$|[-_.])/i.exec(path.split('/').pop() ?? path);
  return m ? m[1].toUpperCase() : null;
}

export function pickGguf(repo: string, files: HubFile[], o: { quant?: string; budgetBytes: number }): HubFile {
  // Split models (model-00001-of-00003.gguf) are not read by the engine: whole files only.
  const ggufs = files.filter((f) => f.path.toLowerCase().endsWith('.gguf') && !f.path.includes('/') && !/-\d{5}-of-\d{5}\.gguf$/i.test(f.path));
  if (!ggufs.length) throw new StoreError(`${repo}: the repo has neither config.json with .safetensors weights nor a single-file .gguf model`);
  const list = ggufs.map((f) => `${ggufQuant(f.path) ?? f.path} (${(f.size / 1e9).toFixed(2)} GB)`).join(', ');
  if (o.quant) {
    const want = o.quant.toUpperCase();
    const hit = ggufs.find((f) => ggufQuant(f.path) === want) ?? ggufs.find((f) => f.path.toUpperCase().includes(want));
    if (!hit) throw new StoreError(`${repo}: no GGUF file for :${o.quant} (the repo has ${list})`);
    return hit;
  }
  const loadable = ggufs.filter((f) => (GGUF_LOADABLE_TYPES as readonly string[]).includes(ggufQuant(f.path) ?? ''));
  const fits = loadable.filter((f) => f.size <= o.budgetBytes).sort((a, b) => b.size - a.size);
  if (fits.length) return fits[0];
  if (!loadable.length) {
    throw new StoreError(`${repo}: none of its GGUF files is of a type the engine loads (${GGUF_LOADABLE_TYPES.join(', ')}); the repo has ${list}. Name one with ${repo}:QUANT to pull it anyway`);
  }
  throw new StoreError(`${repo}: no GGUF file the engine loads fits in ${(o.budgetBytes / 1e9).toFixed(1)} GB (the repo has ${list}); name one with ${repo}:QUANT`);
}
