/**
 * Which GGUF model of a GGUF repo to pull: the quantisation named (`org/name:Q4_K_M`), else the best one
 * that fits — the largest (more bits, closer to the original) among those whose tensor types the engine
 * loads, within the memory budget. A model is one .gguf file, or a split set (NAME-00001-of-0000N.gguf
 * …, the only way the hub holds a model over 50 GB), at the top of the repo or in a folder of its own
 * (`Q4_K_M/…`, as the large MoE repos keep each quantisation).
 */
import { parseGgufSplitName } from '@orchard/engine/gguf';
import { StoreError } from './errors.js';
import type { HubFile } from './hub.js';

/** The quantisation in a GGUF file name: "Llama-3.2-1B-Instruct-Q4_K_M.gguf" → "Q4_K_M". */
export function ggufQuant(path: string): string | null {
  const m = /(?:^|[-_.])((?:I?Q\d(?:_[A-Z0-9]+)*)|BF16|F16|F32|MXFP4(?:_MOE)?)(?=\.gguf$|[-_.])/i.exec(path.split('/').pop() ?? path);
  return m ? m[1].toUpperCase() : null;
}

/**
 * llama-quantize's file types whose tensors are all of types the engine loads (F32/F16/BF16, Q8_0, Q4_0,
 * Q4_K, Q5_K, Q6_K, MXFP4): the K-quant mixes _S/_M use Q4_K..Q6_K only. The header check before the
 * download still reads every tensor's type.
 */
const LOADABLE_QUANTS = new Set(['F32', 'F16', 'BF16', 'Q8_0', 'Q4_0', 'Q4_K', 'Q4_K_S', 'Q4_K_M', 'Q5_K', 'Q5_K_S', 'Q5_K_M', 'Q6_K', 'MXFP4', 'MXFP4_MOE']);

/** One GGUF model of a repo: its files (a split set's parts, in order) and their total size. */
export interface GgufModel {
  /** The first (or only) file's path in the repo: what the engine opens. */
  path: string;
  files: HubFile[];
  size: number;
  quant: string | null;
}

/** The repo's GGUF models: single files and whole split sets, top level or one folder down; vision projectors left out. */
export function ggufModels(files: HubFile[]): GgufModel[] {
  const singles: GgufModel[] = [];
  const sets = new Map<string, { count: number; parts: (HubFile | undefined)[] }>();
  for (const f of files) {
    if (!f.path.toLowerCase().endsWith('.gguf') || f.path.split('/').length > 2) continue;
    const name = f.path.split('/').pop()!;
    if (/^mmproj/i.test(name)) continue;
    const split = parseGgufSplitName(name);
    if (!split) {
      singles.push({ path: f.path, files: [f], size: f.size, quant: ggufQuant(f.path) ?? folderQuant(f.path) });
      continue;
    }
    const key = `${f.path.slice(0, f.path.length - name.length)}${split.prefix}\u0000${split.count}`;
    const set = sets.get(key) ?? { count: split.count, parts: Array.from({ length: split.count }, (): HubFile | undefined => undefined) };
    set.parts[split.no] = f;
    sets.set(key, set);
  }
  const whole: GgufModel[] = [];
  for (const { parts } of sets.values()) {
    // A set with a part missing from the listing is not a model anyone can load.
    if (parts.some((p) => !p)) continue;
    const ps = parts as HubFile[];
    whole.push({ path: ps[0].path, files: ps, size: ps.reduce((a, p) => a + p.size, 0), quant: ggufQuant(ps[0].path) ?? folderQuant(ps[0].path) });
  }
  return [...singles, ...whole].sort((a, b) => a.path.localeCompare(b.path));
}

/** The quantisation a folder names ("Q4_K_M/model-00001-of-00002.gguf"), when the file's name does not. */
function folderQuant(path: string): string | null {
  const parts = path.split('/');
  return parts.length > 1 ? ggufQuant(`${parts[0]}.gguf`) : null;
}

export function pickGguf(repo: string, files: HubFile[], o: { quant?: string; budgetBytes: number }): HubFile[] {
  const models = ggufModels(files);
  if (!models.length) throw new StoreError(`${repo}: the repo has neither config.json with .safetensors weights nor a .gguf model (one file, or a whole NAME-00001-of-0000N.gguf set)`);
  const list = models.map((m) => `${m.quant ?? m.path} (${(m.size / 1e9).toFixed(2)} GB${m.files.length > 1 ? ` in ${m.files.length} parts` : ''})`).join(', ');
  if (o.quant) {
    const want = o.quant.toUpperCase();
    const hit = models.find((m) => m.quant === want) ?? models.find((m) => m.path.toUpperCase().includes(want));
    if (!hit) throw new StoreError(`${repo}: no GGUF file for :${o.quant} (the repo has ${list})`);
    return hit.files;
  }
  const loadable = models.filter((m) => LOADABLE_QUANTS.has(m.quant ?? ''));
  const fits = loadable.filter((m) => m.size <= o.budgetBytes).sort((a, b) => b.size - a.size);
  if (fits.length) return fits[0].files;
  if (!loadable.length) {
    throw new StoreError(`${repo}: none of its GGUF models is of a type the engine loads (${[...LOADABLE_QUANTS].join(', ')}); the repo has ${list}. Name one with ${repo}:QUANT to pull it anyway`);
  }
  throw new StoreError(`${repo}: no GGUF model the engine loads fits in ${(o.budgetBytes / 1e9).toFixed(1)} GB (the repo has ${list}); name one with ${repo}:QUANT`);
}
