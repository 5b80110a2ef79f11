import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_API_PORT, resolveOptions } from '../src/config/options.js';

const tmp = () => mkdtempSync(join(os.tmpdir(), 'orchard-opts-'));

describe('daemon options', () => {
  it('defaults: loopback API on 52415, data dir under home', () => {
    const o = resolveOptions({ dataDir: tmp() }, {});
    expect(o.apiHost).toBe('127.0.0.1');
    expect(o.apiPort).toBe(DEFAULT_API_PORT);
    expect(o.bootstrap).toEqual([]);
    expect(o.clusterKeyFile).toBeNull();
    expect(resolveOptions({}, { HOME: '/h' }).dataDir).toMatch(/\.orchard$/);
  });

  it('flags beat environment beat config file', () => {
    const dir = tmp();
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ 'api-port': 1111, name: 'from-file', bootstrap: ['/ip4/1.2.3.4/tcp/1/p2p/x'] }));
    const env = { ORCHARD_API_PORT: '2222', ORCHARD_NAME: 'from-env' };
    expect(resolveOptions({ dataDir: dir }, {}).apiPort).toBe(1111);
    expect(resolveOptions({ dataDir: dir }, {}).bootstrap).toEqual(['/ip4/1.2.3.4/tcp/1/p2p/x']);
    expect(resolveOptions({ dataDir: dir }, env)).toMatchObject({ apiPort: 2222, name: 'from-env' });
    expect(resolveOptions({ dataDir: dir, apiPort: '3333', name: 'flag' }, env)).toMatchObject({ apiPort: 3333, name: 'flag' });
    expect(resolveOptions({}, { ORCHARD_DATA_DIR: dir }).name).toBe('from-file');
  });

  it('a non-loopback API host needs a token', () => {
    expect(() => resolveOptions({ dataDir: tmp(), apiHost: '0.0.0.0' }, {})).toThrow(/--api-token/);
    expect(resolveOptions({ dataDir: tmp(), apiHost: '0.0.0.0' }, { ORCHARD_API_TOKEN: 's3cret' }).apiToken).toBe('s3cret');
  });

  it('bad values name the setting', () => {
    expect(() => resolveOptions({ dataDir: tmp(), apiPort: 'abc' }, {})).toThrow(/--api-port must be a number/);
    expect(() => resolveOptions({ dataDir: tmp(), apiPort: '70000' }, {})).toThrow(/--api-port must be 0..65535/);
    const dir = tmp();
    writeFileSync(join(dir, 'config.json'), '{"apiPortt": 1}');
    expect(() => resolveOptions({ dataDir: dir }, {})).toThrow(/unknown setting "apiPortt"/);
  });

  it('keep-alive: durations as Ollama takes them, never, and a clear error', () => {
    const dir = tmp();
    expect(resolveOptions({ dataDir: dir }, {}).keepAliveMs).toBe(30 * 60_000);
    expect(resolveOptions({ dataDir: dir, keepAlive: '2h' }, {}).keepAliveMs).toBe(7_200_000);
    expect(resolveOptions({ dataDir: dir }, { ORCHARD_KEEP_ALIVE: '90s' }).keepAliveMs).toBe(90_000);
    expect(resolveOptions({ dataDir: dir, keepAlive: '45' }, {}).keepAliveMs).toBe(45_000);
    expect(resolveOptions({ dataDir: dir, keepAlive: 'never' }, {}).keepAliveMs).toBeNull();
    expect(resolveOptions({ dataDir: dir, keepAlive: '-1' }, {}).keepAliveMs).toBeNull();
    expect(() => resolveOptions({ dataDir: dir, keepAlive: 'soon' }, {})).toThrow(/--keep-alive must be a duration such as 30m/);
  });
});
