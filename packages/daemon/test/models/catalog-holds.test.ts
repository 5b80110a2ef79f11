/**
 * ModelCatalog.holds(id), the per-request model check, agrees with list() (what GET /v1/models shows)
 * for every kind of id: the bundled demo, a complete pulled model, one whose pull did not finish, one
 * not here, and ids that are not repo ids.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BUNDLED_DEMO_DIR, DEMO_MODEL_ID, ModelCatalog } from '../../src/models/catalog.js';
import { MANIFEST_FILE } from '../../src/store/store.js';

const work = mkdtempSync(join(tmpdir(), 'orchard-catalog-holds-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('ModelCatalog.holds', () => {
  it('says what list() says for the demo, complete, unfinished, absent and malformed ids', () => {
    const data = join(work, 'data');
    const complete = join(data, 'models', 'org', 'done');
    mkdirSync(complete, { recursive: true });
    cpSync(BUNDLED_DEMO_DIR, complete, { recursive: true });
    const unfinished = join(data, 'models', 'org', 'half');
    mkdirSync(unfinished, { recursive: true });
    cpSync(BUNDLED_DEMO_DIR, unfinished, { recursive: true });
    writeFileSync(join(unfinished, MANIFEST_FILE), JSON.stringify({ repo: 'org/half', files: {}, pending: ['model.safetensors'] }));
    const withDemo = new ModelCatalog(data);
    const noDemo = new ModelCatalog(data, join(work, 'no-demo-here'));
    const ids = [DEMO_MODEL_ID, 'org/done', 'org/half', 'org/absent', 'other/done', 'org', 'org/done/..', '../org/done', 'org/.hidden'];
    for (const catalog of [withDemo, noDemo]) {
      const listed = catalog.list();
      for (const id of ids) expect([id, catalog.holds(id)]).toEqual([id, listed.includes(id)]);
    }
    // The cases the check must tell apart really occur here.
    expect(withDemo.holds('org/done')).toBe(true);
    expect(withDemo.holds('org/half')).toBe(false);
    expect(withDemo.holds(DEMO_MODEL_ID)).toBe(true);
    expect(noDemo.holds(DEMO_MODEL_ID)).toBe(false);
  });
});
