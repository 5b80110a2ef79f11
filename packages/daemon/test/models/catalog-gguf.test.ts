/**
 * The catalog serves a GGUF like a model directory: a store directory holding a .gguf (a GGUF repo's
 * pull, or a local file linked by `orchard run FILE.gguf`) is listed, described from the file by the
 * engine, and its engine path is the file; an unfinished pull of it is not listed.
 */
import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync, copyFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeRandomModel } from '@orchard/engine/testing';
import { ModelCatalog } from '../../src/models/catalog.js';
import { MANIFEST_FILE } from '../../src/store/store.js';
import { resolveModel, useLocalQuant } from '../../src/cli/model-session.js';

const work = mkdtempSync(join(os.tmpdir(), 'orchard-catalog-gguf-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
const src = join(work, 'src');
writeRandomModel(src, { numLayers: 2, hiddenSize: 64, seed: 3 });
const gguf = join(work, 'tiny-F32.gguf');
hfToGguf(src, gguf, { dtype: 'f32' });

describe('a GGUF in the catalog', () => {
  it('is listed and described from the .gguf, the newest of several quantisations served', async () => {
    const data = join(work, 'data');
    const dir = join(data, 'models', 'org', 'tiny-GGUF');
    mkdirSync(dir, { recursive: true });
    copyFileSync(gguf, join(dir, 'tiny-F32.gguf'));
    hfToGguf(src, join(dir, 'tiny-Q8_0.gguf'), { dtype: 'q8_0' });
    const catalog = new ModelCatalog(data, join(work, 'no-demo'));
    expect(catalog.list()).toEqual(['org/tiny-GGUF']);
    expect(catalog.dirOf('org/tiny-GGUF')).toBe(dir);
    expect(catalog.pathOf('org/tiny-GGUF')).toBe(join(dir, 'tiny-Q8_0.gguf'));
    const d = await catalog.describe('org/tiny-GGUF');
    expect(d.unsupported).toBeUndefined();
    expect(d.dims.numLayers).toBe(2);
    const newer = new Date(Date.now() + 60_000);
    utimesSync(join(dir, 'tiny-F32.gguf'), newer, newer);
    expect(catalog.pathOf('org/tiny-GGUF')).toBe(join(dir, 'tiny-F32.gguf'));
    // Sized from the file now served: F32 weights take about 4x Q8_0's bytes.
    const f32 = await catalog.describe('org/tiny-GGUF');
    expect(f32.spec.totalBytes / d.spec.totalBytes).toBeGreaterThan(3);
    // `orchard run org/tiny-GGUF:Q8_0` with both here: the named one is served again, without a pull.
    expect(useLocalQuant(data, 'org/tiny-GGUF', 'Q8_0')).toBe(true);
    expect(catalog.pathOf('org/tiny-GGUF')).toBe(join(dir, 'tiny-Q8_0.gguf'));
    expect(useLocalQuant(data, 'org/tiny-GGUF', 'Q4_K_M')).toBe(false);
  });

  it('is not listed while its pull is unfinished, and says what it lacks', () => {
    const data = join(work, 'data-pending');
    const dir = join(data, 'models', 'org', 'tiny-GGUF');
    mkdirSync(dir, { recursive: true });
    copyFileSync(gguf, join(dir, 'tiny-F32.gguf'));
    writeFileSync(join(dir, MANIFEST_FILE), JSON.stringify({ repo: 'org/tiny-GGUF', files: {}, pending: ['tiny-F32.gguf'] }));
    const catalog = new ModelCatalog(data, join(work, 'no-demo'));
    expect(catalog.list()).toEqual([]);
    expect(catalog.unlisted('org/tiny-GGUF')).toMatch(/missing tiny-F32\.gguf/);
  });

  it('a local .gguf given to `orchard run` is linked into the store as local/NAME and served from there', async () => {
    const data = join(work, 'data-local');
    const id = await resolveModel(gguf, { url: 'http://127.0.0.1:1' } as never, data);
    expect(id).toBe('local/tiny-F32');
    const catalog = new ModelCatalog(data, join(work, 'no-demo'));
    expect(catalog.list()).toEqual(['local/tiny-F32']);
    expect(catalog.pathOf(id)).toBe(join(data, 'models', 'local', 'tiny-F32', 'tiny-F32.gguf'));
    expect((await catalog.describe(id)).dims.numLayers).toBe(2);
    // Again: the same link, no error.
    expect(await resolveModel(gguf, { url: 'http://127.0.0.1:1' } as never, data)).toBe(id);
  });
});
