import { open, readFile, readdir, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { InputError } from './errors.js';
import { type ModelOptions, type ModelSpec, modelFromConfig, withTensorSizes } from './model.js';
import { headerLength, tensorSizes } from './safetensors.js';

/**
 * The only file I/O of the partitioner, kept out of the pure planner (import it as
 * `@orchard/partitioner/loader`): reads config.json and, when the directory holds safetensors
 * files, their headers (not the weights) for exact byte counts.
 */

/** `path` is a config.json or a directory holding one. */
export async function loadModel(path: string, options: ModelOptions = {}): Promise<ModelSpec> {
  let info;
  try {
    info = await stat(path);
  } catch {
    throw new InputError('model', path, 'does not exist');
  }
  const dir = info.isDirectory() ? path : dirname(path);
  const configPath = info.isDirectory() ? join(path, 'config.json') : path;
  let text: string;
  try {
    text = await readFile(configPath, 'utf8');
  } catch {
    throw new InputError('model', configPath, 'cannot be read (expected a Hugging Face config.json)');
  }
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch (err) {
    throw new InputError('model config', configPath, `is not valid JSON (${(err as Error).message})`);
  }
  // A directory or a config.json inside one is named after the directory, any other file after itself.
  const file = basename(configPath);
  const name = options.name ?? (file === 'config.json' ? basename(dir) : file.replace(/\.json$/, ''));
  try {
    const sizes = options.bits === undefined ? await readTensorSizes(dir) : null;
    if (!sizes) return modelFromConfig(config, { ...options, name });
    return withTensorSizes(config, sizes, { ...options, name });
  } catch (err) {
    // Say which file the bad field is in.
    if (err instanceof InputError && err.source === 'model config') throw new InputError(`model config ${configPath}`, err.field, err.problem);
    throw err;
  }
}

/** Every tensor's byte size from the headers of the safetensors files in `dir`; null when it has none. */
export async function readTensorSizes(dir: string): Promise<{ name: string; bytes: number }[] | null> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.safetensors')).sort();
  if (files.length === 0) return null;
  const headers = await Promise.all(files.map(async (f) => ({ file: join(dir, f), header: await readHeader(join(dir, f)) })));
  return tensorSizes(headers);
}

async function readHeader(file: string): Promise<Uint8Array> {
  const fh = await open(file, 'r');
  try {
    const first = new Uint8Array(8);
    const head = await fh.read(first, 0, 8, 0);
    const n = headerLength(first.subarray(0, head.bytesRead), file);
    const json = new Uint8Array(n);
    const { bytesRead } = await fh.read(json, 0, n, 8);
    if (bytesRead !== n) throw new InputError('safetensors', file, `header is truncated (${bytesRead} of ${n} bytes)`);
    return json;
  } finally {
    await fh.close();
  }
}
