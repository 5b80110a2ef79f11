/**
 * A model directory's weights as one namespace of tensors: `model.safetensors`, or sharded
 * `model-0000N-of-0000M.safetensors` files listed by `model.safetensors.index.json`. Files are opened
 * lazily, so a shard that needs tensors from one file never opens the others.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ModelFormatError } from '../errors.js';
import type { TensorInfo } from './format.js';
import { SafetensorsFile } from './reader.js';

export class Checkpoint {
  readonly dir: string;
  /** Tensor name → file name (relative to dir). */
  readonly #weightMap: Map<string, string> | null;
  readonly #files = new Map<string, SafetensorsFile>();
  readonly #single: string | null;
  readonly #openFile: (name: string) => SafetensorsFile;

  private constructor(dir: string, weightMap: Map<string, string> | null, single: string | null, openFile?: (name: string) => SafetensorsFile) {
    this.dir = dir;
    this.#weightMap = weightMap;
    this.#single = single;
    this.#openFile = openFile ?? ((name) => SafetensorsFile.open(join(dir, name)));
  }

  /**
   * `openFile` gives a weight file by name in place of opening `dir/name` (e.g. a header fetched
   * before the download, `SafetensorsFile.fromHeader`): the index still comes from `dir`.
   */
  static open(dir: string, options: { openFile?: (name: string) => SafetensorsFile } = {}): Checkpoint {
    const indexPath = join(dir, 'model.safetensors.index.json');
    if (existsSync(indexPath)) {
      let index: unknown;
      try {
        index = JSON.parse(readFileSync(indexPath, 'utf8'));
      } catch (err) {
        throw new ModelFormatError(`model.safetensors.index.json: not valid JSON (${(err as Error).message})`, indexPath);
      }
      const wm = (index as { weight_map?: unknown })?.weight_map;
      if (!wm || typeof wm !== 'object' || Array.isArray(wm)) {
        throw new ModelFormatError('model.safetensors.index.json: missing weight_map object', indexPath, 'weight_map');
      }
      const map = new Map<string, string>();
      for (const [k, v] of Object.entries(wm)) {
        if (typeof v !== 'string' || v.includes('/') || v.includes('\\')) {
          throw new ModelFormatError(`model.safetensors.index.json: weight_map entry for ${k} is not a file name`, indexPath, k);
        }
        map.set(k, v);
      }
      return new Checkpoint(dir, map, null, options.openFile);
    }
    const single = join(dir, 'model.safetensors');
    if (!options.openFile && !existsSync(single)) {
      throw new ModelFormatError(`${dir}: no model.safetensors or model.safetensors.index.json`, single);
    }
    return new Checkpoint(dir, null, 'model.safetensors', options.openFile);
  }

  /** Which file holds `tensor` (opening it if needed); throws naming the tensor when absent. */
  file(tensor: string): SafetensorsFile {
    const name = this.#weightMap ? this.#weightMap.get(tensor) : this.#single!;
    if (name === undefined) {
      throw new ModelFormatError(`model.safetensors.index.json: missing tensor ${tensor}`, join(this.dir, 'model.safetensors.index.json'), tensor);
    }
    let f = this.#files.get(name);
    if (!f) {
      f = this.#openFile(name);
      this.#files.set(name, f);
    }
    if (!f.tensors.has(tensor)) {
      throw new ModelFormatError(`${name}: missing tensor ${tensor}`, f.path, tensor);
    }
    return f;
  }

  /** Whether the checkpoint declares `tensor` (without opening files for the single-file layout check). */
  has(tensor: string): boolean {
    if (this.#weightMap) return this.#weightMap.has(tensor);
    return this.file0().tensors.has(tensor);
  }

  info(tensor: string): TensorInfo {
    return this.file(tensor).info(tensor);
  }

  private file0(): SafetensorsFile {
    let f = this.#files.get(this.#single!);
    if (!f) {
      f = this.#openFile(this.#single!);
      this.#files.set(this.#single!, f);
    }
    return f;
  }

  /** The weight files the index names (or the single file), by name. */
  get fileNames(): string[] {
    return this.#weightMap ? [...new Set(this.#weightMap.values())].sort() : [this.#single!];
  }

  /** Tensor data bytes read across all files. */
  get bytesRead(): number {
    let n = 0;
    for (const f of this.#files.values()) n += f.bytesRead;
    return n;
  }

  close(): void {
    for (const f of this.#files.values()) f.close();
    this.#files.clear();
  }
}
