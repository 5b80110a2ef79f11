/**
 * Split GGUF sets (NAME-00001-of-0000N.gguf, as llama.cpp's gguf-split and convert_hf_to_gguf.py write
 * them; the hub's large models only come this way): the parts are written by gguf-split's rule, read
 * back as one model that runs the same tokens as the whole file, described per part, and every way a
 * set can be broken is named with the part at fault. That llama.cpp itself reads these sets is shown in
 * test/oracle/split-gguf.test.ts.
 */
import { copyFileSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hfToGguf, splitGroups } from '../../src/gguf/index.js';
import { readGgufFile } from '../../src/gguf/read-split.js';
import { describeModelFiles, loadInProcessModel, ModelFormatError, type LanguageModel } from '../../src/index.js';
import { writeRandomModel } from '../../src/testing/index.js';
import { argmaxOf, tempDir } from '../helpers.js';

const tmp = tempDir('gguf-split');
afterAll(tmp.cleanup);

const PROMPT = Array.from({ length: 13 }, (_, i) => (i * 29 + 5) % 256);

async function greedy(model: LanguageModel, n = 8): Promise<number[]> {
  const s = model.newSession(PROMPT.length + n + 1);
  let logits = await s.forward(PROMPT);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    out.push(argmaxOf(logits));
    logits = await s.forward([out[i]]);
  }
  return out;
}

describe('splitGroups (gguf-split’s rule)', () => {
  it('by tensor count: a new part every maxTensors tensors', () => {
    expect(splitGroups([1, 1, 1, 1, 1], { maxTensors: 2 })).toEqual([[0, 1], [2, 3], [4]]);
  });
  it('--no-tensor-first-split: the first part holds no tensor', () => {
    expect(splitGroups([1, 1, 1], { maxTensors: 2, noTensorFirst: true })).toEqual([[], [0, 1], [2]]);
  });
  it('by size: aligned sizes summed, a part closed before it would pass the limit; a big tensor gets its own part', () => {
    // 40 → 64 aligned, 20 → 32, 100 → 128
    expect(splitGroups([40, 20, 100, 20], { maxBytes: 100 })).toEqual([[0, 1], [2], [3]]);
  });
});

describe('a model written as a split set', () => {
  const hf = join(tmp.dir, 'hf');
  writeRandomModel(hf, { variant: 'qwen3', hiddenSize: 64, intermediateSize: 128, numLayers: 3, seed: 5 });
  const wholeDir = join(tmp.dir, 'whole');
  const setDir = join(tmp.dir, 'set');
  mkdirSync(wholeDir);
  mkdirSync(setDir);
  const whole = hfToGguf(hf, join(wholeDir, 'm-Q8_0.gguf'), { dtype: 'q8_0' });
  const set = hfToGguf(hf, join(setDir, 'm-Q8_0.gguf'), { dtype: 'q8_0', split: { maxTensors: 9, noTensorFirst: true } });
  const first = join(setDir, 'm-Q8_0-00001-of-00005.gguf');

  it('is written as llama.cpp names and fills the parts: metadata first, tensors after', () => {
    expect(readdirSync(setDir).sort()).toEqual([1, 2, 3, 4, 5].map((i) => `m-Q8_0-0000${i}-of-00005.gguf`));
    expect(set.parts.map((p) => basename(p.path))).toEqual(readdirSync(setDir).sort());
    expect(set.parts[0].tensors).toHaveLength(0);
    expect(set.tensors.length).toBe(whole.tensors.length);
  });

  it('reads back as one header: every tensor once, each in its part, the same bytes as the whole file', () => {
    const h = readGgufFile(first);
    const w = readGgufFile(whole.path);
    expect(h.parts.map((p) => basename(p.path))).toEqual(set.parts.map((p) => basename(p.path)));
    expect([...h.tensors.keys()].sort()).toEqual([...w.tensors.keys()].sort());
    for (const [name, t] of h.tensors) {
      expect(t.bytes).toBe(w.tensors.get(name)!.bytes);
      expect(set.parts.find((p) => p.tensors.some((x) => x.name === name))!.path).toBe(t.file);
    }
    expect(h.metadata.get('general.architecture')).toBe('qwen3');
    expect(h.metadata.get('split.tensors.count')).toBe(w.tensors.size);
    // any part's path opens the set
    expect(readGgufFile(set.parts[3].path).tensors.size).toBe(w.tensors.size);
  });

  it('runs the same greedy tokens as the whole file', async () => {
    const a = await greedy(loadInProcessModel(whole.path));
    const b = await greedy(loadInProcessModel(first));
    expect(b).toEqual(a);
  });

  it('is described per part: each tensor names the file its bytes are in, and the bytes add up to the whole file’s', () => {
    const d = describeModelFiles(first);
    const w = describeModelFiles(whole.path);
    if (!d.loadable || !w.loadable) throw new Error(`not loadable: ${!d.loadable ? d.reason : ''} ${!w.loadable ? w.reason : ''}`);
    expect(d.weightBytes).toBe(w.weightBytes);
    const files = new Set(d.tensors.map((t) => t.file));
    expect(files.size).toBe(4); // every part but the metadata-only first
    expect(files.has(basename(first))).toBe(false);
  });

  describe('broken sets are named with the part at fault', () => {
    const broken = (name: string) => {
      const dir = join(tmp.dir, name);
      mkdirSync(dir);
      for (const p of set.parts) copyFileSync(p.path, join(dir, basename(p.path)));
      return dir;
    };
    const refusal = (path: string) => {
      try {
        readGgufFile(path);
      } catch (err) {
        expect(err).toBeInstanceOf(ModelFormatError);
        return (err as Error).message;
      }
      throw new Error('read without error');
    };

    it('a missing part', () => {
      const dir = broken('missing');
      rmSync(join(dir, 'm-Q8_0-00003-of-00005.gguf'));
      expect(refusal(join(dir, 'm-Q8_0-00001-of-00005.gguf'))).toMatch(/part 3 of this 5-part split GGUF is missing \(m-Q8_0-00003-of-00005\.gguf\)/);
      const d = describeModelFiles(join(dir, 'm-Q8_0-00001-of-00005.gguf'));
      expect(d.loadable).toBe(false);
      if (!d.loadable) expect(d.cause).toBe('files');
    });

    it('a part renamed away from gguf-split’s names', () => {
      const dir = broken('renamed');
      renameSync(join(dir, 'm-Q8_0-00001-of-00005.gguf'), join(dir, 'model.gguf'));
      expect(refusal(join(dir, 'model.gguf'))).toMatch(/model\.gguf: is part 1 of a 5-part split GGUF, but its name does not end in -00001-of-00005\.gguf/);
    });

    it('a part of another set under the expected name', () => {
      const dir = broken('mixed');
      const other = join(tmp.dir, 'other');
      mkdirSync(other);
      const o = hfToGguf(hf, join(other, 'm-Q8_0.gguf'), { dtype: 'q8_0', split: { maxTensors: 4 } });
      copyFileSync(o.parts[1].path, join(dir, 'm-Q8_0-00002-of-00005.gguf'));
      expect(refusal(join(dir, 'm-Q8_0-00001-of-00005.gguf'))).toMatch(new RegExp(`m-Q8_0-00002-of-00005\\.gguf: says it is part 2 of ${o.parts.length}, expected part 2 of 5`));
    });
  });
});
