/**
 * A GGUF's tensor byte ranges from a prefix of the file (store/chunked/gguf-layout.ts) are the engine
 * reader's, on a file llama.cpp's layout written by hfToGguf; a prefix that ends inside the header
 * asks for more, and a damaged header is refused with the file named.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hfToGguf, readGgufFile } from '@orchard/engine/gguf';
import { writeRandomModel } from '@orchard/engine/testing';
import { parseGgufLayout, type GgufLayout } from '../../src/store/chunked/gguf-layout.js';
import { ggufStageTensorFilter } from '../../src/store/safetensors-range.js';

const dir = mkdtempSync(join(os.tmpdir(), 'orchard-gguf-layout-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('GGUF layout from a prefix', () => {
  writeRandomModel(join(dir, 'hf'), { variant: 'qwen3-moe', mlpOnlyLayers: [], numLayers: 3, seed: 3 });
  const path = join(dir, 'moe.gguf');
  hfToGguf(join(dir, 'hf'), path, { dtype: 'f32' });
  const bytes = readFileSync(path);
  const engine = readGgufFile(path);

  it('gives every tensor the byte range the engine reads', () => {
    const r = parseGgufLayout(bytes, bytes.length, 'moe.gguf') as GgufLayout;
    expect(r.headerEnd).toBe(engine.dataStart);
    expect(r.tensors.map((t) => [t.name, t.start, t.end]).sort()).toEqual([...engine.tensors.values()].map((t) => [t.name, t.offset, t.offset + t.bytes]).sort());
    expect(r.tensors.some((t) => t.name.includes('_exps'))).toBe(true);
  });

  it('asks for more bytes until the tensor table is in, then gives the same answer', () => {
    let prefix = 64;
    let r = parseGgufLayout(bytes.subarray(0, prefix), bytes.length, 'moe.gguf');
    let rounds = 0;
    while ('more' in r) {
      expect(r.more).toBeGreaterThan(prefix);
      prefix = r.more;
      r = parseGgufLayout(bytes.subarray(0, prefix), bytes.length, 'moe.gguf');
      rounds++;
    }
    expect(rounds).toBeGreaterThan(0);
    expect(prefix).toBeGreaterThanOrEqual(engine.dataStart - engine.alignment);
    expect(r.tensors.length).toBe(engine.tensors.size);
  });

  it('refuses a file that is not a GGUF or lies about its size', () => {
    expect(() => parseGgufLayout(Buffer.from('not a gguf file at all'), 22, 'x.gguf')).toThrow(/x\.gguf: not a GGUF file/);
    expect(() => parseGgufLayout(bytes, bytes.length - 100, 'short.gguf')).toThrow(/short\.gguf: tensor .* past the/);
  });

  it("a stage's filter keeps its blocks' tensors (experts included) and the head's", () => {
    const keep = ggufStageTensorFilter({ layers: [1, 3], embed: false, head: true });
    const kept = [...engine.tensors.keys()].filter(keep);
    expect(kept.some((n) => n.startsWith('blk.0.'))).toBe(false);
    expect(kept).toContain('blk.2.ffn_gate_exps.weight');
    expect(kept).toContain('output_norm.weight');
    expect(kept).not.toContain('token_embd.weight');
  });
});
