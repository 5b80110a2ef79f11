/**
 * The chunked store file: the cut (same on every node), the safetensors layout and partial header,
 * and the on-disk chunk log (resume after a restart, a torn last record, a whole-file check).
 */
import { createHash } from 'node:crypto';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SafetensorsFile } from '@orchard/engine';
import { writeRandomModel, type RandomModelInfo } from '@orchard/engine/testing';
import { ChunkedFile, CHUNK_DIR, chunkDigest, contentKey } from '../../src/store/chunked/chunk-file.js';
import { chunkCount, chunkSizeFor, chunksCovering, fromRuns, MAX_CHUNK, MIN_CHUNK, toRuns } from '../../src/store/chunked/layout.js';
import { neededRanges, parseLayout, partialHeader } from '../../src/store/chunked/safetensors-layout.js';
import { ChecksumError, StoreError } from '../../src/store/errors.js';
import { stageTensorFilter } from '../../src/store/safetensors-range.js';

let work: string;
let model: RandomModelInfo;
let weights: Buffer;
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'orchard-chunked-'));
  model = writeRandomModel(join(work, 'src'), { hiddenSize: 128, intermediateSize: 256, numLayers: 4, seed: 3 });
  weights = readFileSync(join(model.dir, 'model.safetensors'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

const infoFor = (bytes: Buffer, label = 'org/m: model.safetensors') => ({ key: contentKey({ sha256: sha(bytes) })!, size: bytes.byteLength, sha256: sha(bytes), label });

/** Writes the chunks `which` of `bytes` into `f`, as a verified source would. */
async function fill(f: ChunkedFile, bytes: Buffer, which: number[]): Promise<void> {
  for (const i of which) {
    const [s, e] = f.span(i);
    const piece = bytes.subarray(s, e);
    await f.writeChunk(i, piece, chunkDigest(piece));
  }
}

describe('chunk layout', () => {
  it('sizes chunks by the file size alone, within bounds, and covers ranges by index', () => {
    expect(chunkSizeFor(1000)).toBe(MIN_CHUNK);
    expect(chunkSizeFor(64 * MIN_CHUNK + 1)).toBe(2 * MIN_CHUNK);
    expect(chunkSizeFor(600e9)).toBe(MAX_CHUNK);
    expect(chunkCount(10, 4)).toBe(3);
    expect(chunksCovering([[0, 1], [7, 9], [11, 12]], 12, 4)).toEqual([0, 1, 2]);
    expect(chunksCovering([[4, 8]], 12, 4)).toEqual([1]);
    expect(chunksCovering([[5, 5]], 12, 4)).toEqual([]);
  });

  it('passes index sets as runs and refuses runs outside the file', () => {
    expect(toRuns([5, 1, 2, 3, 9, 2])).toEqual([[1, 4], [5, 6], [9, 10]]);
    expect(fromRuns([[1, 4], [9, 10]], 10)).toEqual([1, 2, 3, 9]);
    expect(() => fromRuns([[8, 11]], 10)).toThrow(/outside 0..10/);
    expect(() => fromRuns([[3, 3]], 10)).toThrow(RangeError);
  });
});

describe('safetensors layout', () => {
  it('finds every tensor at its byte offsets and checks the header against the listed size', () => {
    const layout = parseLayout(weights, weights.byteLength, 'm');
    const f = SafetensorsFile.open(join(model.dir, 'model.safetensors'));
    expect(layout.tensors.map((t) => t.name).sort()).toEqual([...f.tensors.keys()].sort());
    f.close();
    expect(layout.tensors.at(-1)!.end).toBe(weights.byteLength);
    expect(() => parseLayout(weights, weights.byteLength + 1, 'org/m: model.safetensors')).toThrow(/org\/m: model.safetensors: the header's tensors end at byte \d+ but the hub lists \d+ bytes/);
    const bad = Buffer.from(weights);
    bad.writeBigUInt64LE(BigInt(weights.byteLength), 0);
    expect(() => parseLayout(bad, weights.byteLength, 'x.safetensors')).toThrow(/x.safetensors: implausible safetensors header length/);
  });

  it('a stage needs its tensors plus the header; the partial header keeps every offset', () => {
    const layout = parseLayout(weights, weights.byteLength, 'm');
    const keep = stageTensorFilter({ layers: [2, 4], embed: false, head: true });
    const ranges = neededRanges(layout, keep);
    expect(ranges[0]).toEqual([0, layout.headerEnd]);
    const names = layout.tensors.filter((t) => keep(t.name)).map((t) => t.name);
    expect(names.some((n) => n.startsWith('model.layers.1.'))).toBe(false);
    expect(names).toContain('lm_head.weight');
    const header = partialHeader(layout, new Set(names));
    expect(header.byteLength).toBe(layout.headerEnd);
    // A file with the partial header and only the kept tensors' bytes reads as a valid checkpoint.
    const sparse = Buffer.alloc(weights.byteLength);
    for (const [s, e] of ranges.slice(1)) weights.copy(sparse, s, s, e);
    sparse.set(header, 0);
    const path = join(work, 'partial.safetensors');
    writeFileSync(path, sparse);
    const f = SafetensorsFile.open(path);
    expect([...f.tensors.keys()].sort()).toEqual([...names].sort());
    const t = layout.tensors.find((x) => x.name === 'lm_head.weight')!;
    const got = new Uint8Array(t.end - t.start);
    const info = f.info('lm_head.weight');
    f.readBlock('lm_head.weight', got, 0, info.shape[0], 0, info.shape[1]);
    expect(Buffer.from(got).equals(weights.subarray(t.start, t.end))).toBe(true);
    expect(() => f.info('model.layers.0.self_attn.q_proj.weight')).toThrow(/missing tensor model.layers.0.self_attn.q_proj.weight/);
    f.close();
  });
});

describe('chunk file', () => {
  it('keeps verified chunks across a reopen, and serves them exactly', async () => {
    const path = join(work, 'resume', 'model.safetensors');
    const info = infoFor(weights);
    const f = await ChunkedFile.open(path, info);
    expect(statSync(path).size).toBe(weights.byteLength);
    expect(f.count).toBe(Math.ceil(weights.byteLength / f.chunkSize));
    await fill(f, weights, [0, 2, f.count - 1]);
    await f.close();
    const g = await ChunkedFile.open(path, info);
    expect(g.verified()).toEqual([0, 2, g.count - 1]);
    expect(g.digest(2)!.equals(chunkDigest(weights.subarray(2 * g.chunkSize, 3 * g.chunkSize)))).toBe(true);
    expect((await g.readChunk(g.count - 1)).equals(weights.subarray((g.count - 1) * g.chunkSize))).toBe(true);
    await expect(g.readChunk(1)).rejects.toThrow(/org\/m: model.safetensors: chunk 1 is not here/);
    await g.close();
  });

  it('drops a torn last record and still appends after it', async () => {
    const path = join(work, 'torn', 'model.safetensors');
    const info = infoFor(weights);
    const f = await ChunkedFile.open(path, info);
    await fill(f, weights, [0, 1]);
    await f.close();
    appendFileSync(join(work, 'torn', CHUNK_DIR, 'model.safetensors.log'), '2 abcd');
    const g = await ChunkedFile.open(path, info);
    expect(g.verified()).toEqual([0, 1]);
    await fill(g, weights, [3]);
    await g.close();
    expect((await ChunkedFile.open(path, info).then(async (h) => [h.verified(), await h.close()]))[0]).toEqual([0, 1, 3]);
  });

  it('forgets everything when the log belongs to another file', async () => {
    const path = join(work, 'other', 'model.safetensors');
    const f = await ChunkedFile.open(path, infoFor(weights));
    await fill(f, weights, [0]);
    await f.close();
    const changed = Buffer.from(weights);
    changed[changed.length - 1] ^= 1;
    const g = await ChunkedFile.open(path, infoFor(changed));
    expect(g.verifiedCount).toBe(0);
    await g.close();
  });

  it('a partial header on disk, the hub header to peers, and the hub file once complete', async () => {
    const path = join(work, 'header', 'model.safetensors');
    const f = await ChunkedFile.open(path, infoFor(weights));
    const layout = parseLayout(weights, weights.byteLength, 'm');
    const lm = layout.tensors.find((t) => t.name === 'lm_head.weight')!;
    const first = chunksCovering([[0, layout.headerEnd], [lm.start, lm.end]], weights.byteLength, f.chunkSize);
    await fill(f, weights, first);
    await f.writeHeader(partialHeader(layout, new Set(['lm_head.weight'])));
    expect([...SafetensorsFile.open(path).tensors.keys()]).toEqual(['lm_head.weight']);
    expect((await f.readChunk(0)).equals(weights.subarray(0, f.chunkSize))).toBe(true);
    await fill(f, weights, [...Array(f.count).keys()].filter((i) => !first.includes(i)));
    expect(f.complete).toBe(true);
    await f.verifyWhole();
    expect(f.wholeVerified).toBe(true);
    expect(readFileSync(path).equals(weights)).toBe(true);
    await f.close();
    const again = await ChunkedFile.open(path, infoFor(weights));
    expect(again.wholeVerified).toBe(true);
    await again.close();
  });

  it('a complete file that does not match the hub hash is named and nothing stays verified', async () => {
    const path = join(work, 'mismatch', 'model.safetensors');
    const info = { ...infoFor(weights), sha256: '0'.repeat(64) };
    const f = await ChunkedFile.open(path, info);
    await fill(f, weights, [...Array(f.count).keys()]);
    const err = await f.verifyWhole().catch((e) => e);
    expect(err).toBeInstanceOf(ChecksumError);
    expect(err.message).toMatch(/org\/m: model.safetensors: checksum mismatch/);
    expect(f.verifiedCount).toBe(0);
    await f.close();
    expect((await ChunkedFile.open(path, info)).verifiedCount).toBe(0);
  });

  it('a chunk of the wrong length is refused with the file and chunk named', async () => {
    const f = await ChunkedFile.open(join(work, 'len', 'model.safetensors'), infoFor(weights));
    await expect(f.writeChunk(0, new Uint8Array(3), new Uint8Array(32))).rejects.toThrow(StoreError);
    await expect(f.writeChunk(0, new Uint8Array(3), new Uint8Array(32))).rejects.toThrow(/model.safetensors: chunk 0 has 3 bytes/);
    await f.close();
  });
});
