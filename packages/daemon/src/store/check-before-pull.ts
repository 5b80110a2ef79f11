/**
 * Check before download: with a model's small files in its directory (config.json, the index, the
 * tokenizer files) and each safetensors file known by its header alone, the engine's own capability
 * check (`describeModelFiles`: config, the weights plan over every tensor, the tokenizer) says whether
 * it loads the model. An unloadable model is refused with the engine's reason before a byte of
 * weights moves.
 */
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { describeModelFiles, ModelFormatError, SafetensorsFile, UnsupportedModelError, type ModelFileDescription } from '@orchard/engine';
import { readOneGgufFile } from '@orchard/engine/gguf';
import { headerEnd } from './chunked/safetensors-layout.js';
import { ModelRefusedError } from './errors.js';
import type { HubClient, HubFile } from './hub.js';

/** A safetensors file's header JSON (the bytes after its 8-byte length). */
export type HeaderSource = (file: HubFile) => Promise<Uint8Array>;

/** Headers fetched at once. */
const PARALLEL = 8;

/**
 * A safetensors header straight from the hub: two range requests, its length, then the file up to the
 * header's end. Both start at byte 0, which is where a download's chunk ranges start too, so a hub or
 * cache that answers whole chunks serves these from its first one.
 */
export async function readHubHeader(hub: HubClient, repo: string, revision: string, file: HubFile, signal?: AbortSignal): Promise<Uint8Array> {
  const end = headerEnd(await hub.readRange(repo, revision, file.path, 0, 8, signal), file.size, `${repo}: ${file.path}`);
  return (await hub.readRange(repo, revision, file.path, 0, end, signal)).subarray(8);
}

/** The engine's description of the model in `dir` from its small files and the headers of `weights`; throws ModelRefusedError with the engine's reason. */
export async function checkModelFiles(repo: string, dir: string, weights: HubFile[], header: HeaderSource, parallel = PARALLEL): Promise<ModelFileDescription> {
  const files = new Map<string, SafetensorsFile>();
  const queue = [...weights];
  const worker = async () => {
    for (let f = queue.shift(); f; f = queue.shift()) {
      const bytes = await header(f);
      try {
        files.set(f.path, SafetensorsFile.fromHeader(join(dir, f.path), bytes, f.size));
      } catch (err) {
        if (err instanceof ModelFormatError) throw new ModelRefusedError(repo, err.message);
        throw err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, weights.length) }, worker));
  const d = describeModelFiles(dir, {
    openFile: (name) => {
      const f = files.get(name);
      if (!f) throw new ModelFormatError(`model.safetensors.index.json: names ${name}, which the repo does not hold`, join(dir, 'model.safetensors.index.json'), name);
      return f;
    },
  });
  if (!d.loadable) throw new ModelRefusedError(repo, d.reason);
  return d;
}

/** The first range asked of a GGUF file, and the most: metadata with a large vocabulary runs to tens of MiB. */
const GGUF_FIRST = 256 * 2 ** 10;
const GGUF_MOST = 256 * 2 ** 20;

/**
 * `use` run on stand-ins of a GGUF model's files (one file, or a split set's parts) built from their
 * headers alone: for each file, ranges from byte 0 (256 KiB, then four times more) until its header
 * (metadata and tensor table) ends within what was fetched, laid into a sparse file of the real size (no
 * tensor byte is fetched); `use` gets the first file's stand-in (a set is joined from its parts as the
 * loader joins it). Errors reading a header are ModelRefusedError with the reason.
 */
export async function withGgufHeaders<T>(repo: string, files: HubFile[], range: (file: HubFile, start: number, end: number) => Promise<Uint8Array>, use: (path: string) => T | Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'orchard-gguf-check-'));
  try {
    // A split set's parts lie in one folder of the repo: the stand-ins keep their names side by side.
    for (const file of files) await standInHeader(repo, file, join(dir, basename(file.path)), (start, end) => range(file, start, end));
    return await use(join(dir, basename(files[0].path)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Writes `path`, a sparse stand-in of `file` holding its GGUF header (read as one file alone). */
async function standInHeader(repo: string, file: HubFile, path: string, range: (start: number, end: number) => Promise<Uint8Array>): Promise<void> {
  for (let want = Math.min(file.size, GGUF_FIRST); ; want = Math.min(file.size, want * 4)) {
    writeFileSync(path, await range(0, want));
    truncateSync(path, file.size);
    const last = want >= file.size || want >= GGUF_MOST;
    let dataStart: number;
    try {
      dataStart = readOneGgufFile(path).dataStart;
    } catch (err) {
      // Past what was fetched the stand-in reads zeros: a header cut there may not parse.
      if (!last) continue;
      if (err instanceof ModelFormatError || err instanceof UnsupportedModelError) throw new ModelRefusedError(repo, err.message);
      throw err;
    }
    if (dataStart > want) {
      if (last) throw new ModelRefusedError(repo, `${file.path}: its header runs past the first ${GGUF_MOST} bytes`);
      continue;
    }
    return;
  }
}
