import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gguf as parseGguf, GGUFValueType } from '@huggingface/gguf';
import { afterAll, describe, expect, it } from 'vitest';
import { f32ToF16Bits } from '../../src/numeric/half.js';
import { gguf, writeGguf, type GgufTensorSource } from '../../src/gguf/index.js';

const dir = mkdtempSync(join(tmpdir(), 'orchard-gguf-write-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function f32Tensor(name: string, shape: number[], seed: number): GgufTensorSource & { values: Float32Array } {
  const n = shape.reduce((a, b) => a * b, 1);
  const values = Float32Array.from({ length: n }, (_, i) => Math.sin(seed * 1000 + i) * (i + 1));
  return { name, type: 'F32', shape, values, data: () => new Uint8Array(values.buffer) };
}

function f16Tensor(name: string, shape: number[], seed: number): GgufTensorSource & { bits: Uint16Array } {
  const n = shape.reduce((a, b) => a * b, 1);
  const bits = Uint16Array.from({ length: n }, (_, i) => f32ToF16Bits(Math.cos(seed + i * 0.37)));
  return { name, type: 'F16', shape, bits, data: () => new Uint8Array(bits.buffer) };
}

describe('writeGguf', () => {
  it('writes a v3 file that @huggingface/gguf reads back: metadata, reversed dims, aligned offsets, data', async () => {
    const path = join(dir, 'mixed.gguf');
    // Odd sizes so every tensor but the last needs padding to the 32-byte alignment.
    const a = f32Tensor('a.weight', [3, 5], 1); // 60 bytes
    const b = f16Tensor('b.weight', [7, 3], 2); // 42 bytes
    const c = f32Tensor('c.bias', [11], 3); // 44 bytes
    const written = writeGguf(
      path,
      {
        'general.architecture': gguf.str('llama'),
        'test.u32': gguf.u32(4_000_000_000),
        'test.i32': gguf.i32(-7),
        'test.f32': gguf.f32(1e-5),
        'test.bool': gguf.bool(true),
        'test.u64': gguf.u64(2n ** 40n),
        'test.u8': { type: 'UINT8', value: 200 },
        'test.f64': { type: 'FLOAT64', value: Math.PI },
        'test.strings': gguf.arr('STRING', ['Ġ', 'a b', '<|endoftext|>']),
        'test.ints': gguf.arr('INT32', [1, -2, 3]),
        'test.empty': gguf.arr('STRING', []),
      },
      [a, b, c],
    );
    const parsed = await parseGguf(path, { allowLocalFile: true, typedMetadata: true });
    const md = parsed.typedMetadata as unknown as Record<string, { type: number; value: unknown; subType?: number }>;
    expect(md.version.value).toBe(3);
    expect(md.tensor_count.value).toBe(3n);
    expect(md['general.architecture']).toMatchObject({ type: GGUFValueType.STRING, value: 'llama' });
    expect(md['test.u32']).toMatchObject({ type: GGUFValueType.UINT32, value: 4_000_000_000 });
    expect(md['test.i32']).toMatchObject({ type: GGUFValueType.INT32, value: -7 });
    expect(md['test.f32'].type).toBe(GGUFValueType.FLOAT32);
    expect(md['test.f32'].value).toBeCloseTo(1e-5, 12);
    expect(md['test.bool']).toMatchObject({ type: GGUFValueType.BOOL, value: true });
    expect(md['test.u64']).toMatchObject({ type: GGUFValueType.UINT64, value: 2n ** 40n });
    expect(md['test.u8']).toMatchObject({ type: GGUFValueType.UINT8, value: 200 });
    expect(md['test.f64']).toMatchObject({ type: GGUFValueType.FLOAT64, value: Math.PI });
    expect(md['test.strings']).toMatchObject({ type: GGUFValueType.ARRAY, subType: GGUFValueType.STRING, value: ['Ġ', 'a b', '<|endoftext|>'] });
    expect(md['test.ints']).toMatchObject({ type: GGUFValueType.ARRAY, subType: GGUFValueType.INT32, value: [1, -2, 3] });
    expect(md['test.empty'].value).toEqual([]);

    // GGUF lists dims innermost first: a row-major [3, 5] tensor is [5, 3].
    expect(parsed.tensorInfos.map((t) => [t.name, t.shape.map(Number), t.dtype])).toEqual([
      ['a.weight', [5, 3], 0],
      ['b.weight', [3, 7], 1],
      ['c.bias', [11], 0],
    ]);
    expect(parsed.tensorInfos.map((t) => Number(t.offset))).toEqual([0, 64, 128]);
    expect(Number(parsed.tensorDataOffset) % 32).toBe(0);
    expect(Number(parsed.tensorDataOffset)).toBe(written.dataStart);

    const file = readFileSync(path);
    const at = (name: string, bytes: number) => {
      const info = parsed.tensorInfos.find((t) => t.name === name)!;
      const start = Number(parsed.tensorDataOffset + info.offset);
      return file.subarray(start, start + bytes);
    };
    expect(new Float32Array(new Uint8Array(at('a.weight', 60)).buffer)).toEqual(a.values);
    expect(new Uint16Array(new Uint8Array(at('b.weight', 42)).buffer)).toEqual(b.bits);
    expect(new Float32Array(new Uint8Array(at('c.bias', 44)).buffer)).toEqual(c.values);
    expect(file.length).toBe(written.dataStart + 128 + 44);
  });

  it('honours a custom alignment and records it as general.alignment', async () => {
    const path = join(dir, 'aligned.gguf');
    writeGguf(path, { 'general.architecture': gguf.str('llama') }, [f32Tensor('x', [3], 1), f32Tensor('y', [5], 2)], { alignment: 64 });
    const parsed = await parseGguf(path, { allowLocalFile: true });
    expect((parsed.metadata as Record<string, unknown>)['general.alignment']).toBe(64);
    expect(Number(parsed.tensorDataOffset) % 64).toBe(0);
    expect(parsed.tensorInfos.map((t) => Number(t.offset))).toEqual([0, 64]);
  });

  it('names the tensor whose data does not match its shape', () => {
    const bad: GgufTensorSource = { name: 'blk.0.attn_q.weight', type: 'F16', shape: [4, 4], data: () => new Uint8Array(30) };
    expect(() => writeGguf(join(dir, 'bad.gguf'), {}, [bad])).toThrow(/blk\.0\.attn_q\.weight has 30 bytes.*needs 32/);
  });

  it('refuses duplicate tensor names and out-of-range metadata', () => {
    expect(() => writeGguf(join(dir, 'dup.gguf'), {}, [f32Tensor('t', [2], 1), f32Tensor('t', [2], 2)])).toThrow(/tensor t given twice/);
    expect(() => writeGguf(join(dir, 'range.gguf'), { 'x.count': gguf.u32(-1) }, [])).toThrow(/x\.count/);
  });
});
