/**
 * A model's files checked the way a runner would meet them, before a runner is spawned: config.json
 * the engine accepts, a tokenizer's files present, safetensors whose headers are whole and whose data
 * the files hold. A failure here (or one a runner reports) marks the model failed on this node
 * until its files change, so every request is answered at once with the reason, not after a spawn.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Checkpoint, isGgufPath, loadModelConfig, ModelFormatError, SafetensorsFile, UnsupportedModelError } from '@orchard/engine';
import { ServeError } from '../requests/errors.js';

/** The model's files cannot be loaded, for a reason that waiting will not fix. */
export class ModelFilesError extends ServeError {
  constructor(
    readonly model: string,
    readonly reason: string,
  ) {
    super(503, 'model_load_failed', `${model} cannot be loaded: ${reason} (fix its files; it is tried again once they change)`);
    this.name = 'ModelFilesError';
  }
}

/**
 * What identifies this state of the directory's files: each file's name, size and modification
 * time, one folder down too (GGUF repos keep each quantisation in a folder). A copy, an edit or a
 * finished pull changes it; nothing else does.
 */
export function filesFingerprint(dir: string, depth = 1): string {
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return '';
  }
  return names
    .map((n) => {
      const st = statSync(join(dir, n), { throwIfNoEntry: false });
      if (st?.isFile()) return `${n}:${st.size}:${Math.trunc(st.mtimeMs)}`;
      if (st?.isDirectory() && depth > 0 && !n.startsWith('.')) {
        const inner = filesFingerprint(join(dir, n), depth - 1);
        return inner && `${n}/[${inner}]`;
      }
      return '';
    })
    .filter(Boolean)
    .join('|');
}

/** The vocabulary files a tokenizer is built from (Hugging Face, tiktoken, SentencePiece). */
const TOKENIZER_FILES = ['tokenizer.json', 'tiktoken.model', 'tokenizer.model'];

/**
 * Why the model in `dir` (a directory, or a GGUF file) cannot be loaded, or null when the engine can
 * open every file it needs. A GGUF holds config, vocabulary and weights in one file: its metadata is
 * read here, its tensors are checked by the engine's description (the catalog's next step).
 */
export function loadProblem(dir: string): string | null {
  try {
    loadModelConfig(dir);
  } catch (err) {
    // An architecture the engine does not run is sized for planning and refused by placement, which names it.
    if (err instanceof UnsupportedModelError) return null;
    return reasonOf(err, isGgufPath(dir) ? dir : 'config.json');
  }
  if (isGgufPath(dir)) return null;
  // Building a large vocabulary takes seconds (Qwen3's: 5 s on a busy machine), too long for the
  // daemon's event loop on every model it lists: here only its presence; the daemon builds it before
  // the runners start and each runner before it reads weights, and either failure marks the model.
  const vocabularies = TOKENIZER_FILES.filter((f) => existsSync(join(dir, f)));
  if (vocabularies.length === 0) return `tokenizer.json: file not found in ${dir} (nor ${TOKENIZER_FILES.slice(1).join(', ')}): copy the repo's tokenizer files there, or pull the model again`;
  let ckpt: Checkpoint | undefined;
  try {
    ckpt = Checkpoint.open(dir);
    // Every tensor the index maps must be in its file's header (a partly pulled file lists only what
    // arrived); a single file is opened, which checks its header against its size.
    const mapped = indexedTensors(dir);
    if (mapped) for (const t of mapped) ckpt.file(t);
    else SafetensorsFile.open(join(dir, 'model.safetensors')).close();
  } catch (err) {
    return reasonOf(err, 'model.safetensors');
  } finally {
    ckpt?.close();
  }
  return null;
}

/** The tensor names of model.safetensors.index.json (Checkpoint.open has checked it), or null without one. */
function indexedTensors(dir: string): string[] | null {
  const path = join(dir, 'model.safetensors.index.json');
  if (!existsSync(path)) return null;
  return Object.keys((JSON.parse(readFileSync(path, 'utf8')) as { weight_map: Record<string, string> }).weight_map);
}

function reasonOf(err: unknown, file: string): string {
  const message = (err as Error).message ?? String(err);
  if (err instanceof ModelFormatError) return message;
  // The engine's own errors name their file; anything else is said with the file it came from.
  return message.includes(file) ? message : `${file}: ${message}`;
}
