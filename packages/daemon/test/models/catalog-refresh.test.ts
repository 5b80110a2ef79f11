/**
 * A model folder edited in place (its config.json's context length) is described again under the
 * same name: ModelCatalog keys its descriptions by the files' names, sizes and modification times.
 */
import { mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { DEMO_MODEL_ID, ModelCatalog } from '../../src/models/catalog.js';

const work = mkdtempSync(join(tmpdir(), 'orchard-catalog-refresh-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('a local model folder edited in place', () => {
  it('is described again when config.json changes, even at the same size; unchanged files are not re-read', async () => {
    const dir = writeRandomModel(join(work, 'model'), { variant: 'llama', numLayers: 2, seed: 3 }).dir;
    const configFile = join(dir, 'config.json');
    const config = JSON.parse(readFileSync(configFile, 'utf8'));
    const catalog = new ModelCatalog(join(work, 'data'), dir);

    const first = await catalog.describe(DEMO_MODEL_ID);
    expect(first.maxContext).toBe(config.max_position_embeddings);
    expect(await catalog.describe(DEMO_MODEL_ID)).toBe(first);

    // a context length of the same number of digits: the file keeps its size, only its mtime moves
    const before = readFileSync(configFile, 'utf8');
    const digits = String(config.max_position_embeddings).length;
    const smaller = 10 ** (digits - 1) + 1;
    expect(smaller).not.toBe(config.max_position_embeddings);
    writeFileSync(configFile, before.replace(`"max_position_embeddings": ${config.max_position_embeddings}`, `"max_position_embeddings": ${smaller}`).replace(`"max_position_embeddings":${config.max_position_embeddings}`, `"max_position_embeddings":${smaller}`));
    expect(readFileSync(configFile, 'utf8').length).toBe(before.length);
    const later = new Date(Date.now() + 5000);
    utimesSync(configFile, later, later);

    const second = await catalog.describe(DEMO_MODEL_ID);
    expect(second.maxContext).toBe(smaller);
    expect(second).not.toBe(first);
  });
});
