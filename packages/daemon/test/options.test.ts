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

  it('loopback is decided on the parsed address: 127.example.com is a host name and needs a token', () => {
    for (const host of ['127.example.com', '127.0.0.1.nip.io', 'localhost.example', '0.0.0.0', '::', '128.0.0.1']) {
      expect(() => resolveOptions({ dataDir: tmp(), apiHost: host }, {}), host).toThrow(/--api-token/);
    }
    for (const host of ['127.0.0.1', '127.1.2.3', 'localhost', 'LOCALHOST', '::1', '[::1]', '::ffff:127.0.0.1']) {
      expect(resolveOptions({ dataDir: tmp(), apiHost: host }, {}).apiToken, host).toBeNull();
    }
  });

  it('data-plane encryption and cipher: auto by default, from flags, environment or file, bad values named', () => {
    expect(resolveOptions({ dataDir: tmp() }, {})).toMatchObject({ dataPlaneEncryption: 'auto', dataPlaneCipher: 'auto' });
    expect(resolveOptions({ dataDir: tmp(), dataPlaneEncryption: 'always' }, {}).dataPlaneEncryption).toBe('always');
    expect(resolveOptions({ dataDir: tmp() }, { ORCHARD_DATA_PLANE_ENCRYPTION: 'never', ORCHARD_DATA_PLANE_CIPHER: 'chacha20-poly1305' })).toMatchObject({
      dataPlaneEncryption: 'never',
      dataPlaneCipher: 'chacha20-poly1305',
    });
    const dir = tmp();
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ 'data-plane-cipher': 'aes-256-gcm' }));
    expect(resolveOptions({ dataDir: dir }, {}).dataPlaneCipher).toBe('aes-256-gcm');
    expect(() => resolveOptions({ dataDir: tmp(), dataPlaneEncryption: 'sometimes' }, {})).toThrow(/--data-plane-encryption must be one of auto, always, never/);
    expect(() => resolveOptions({ dataDir: tmp(), dataPlaneCipher: 'rot13' }, {})).toThrow(/--data-plane-cipher must be one of/);
  });

  it('more API host names from a flag list, the environment or the file', () => {
    expect(resolveOptions({ dataDir: tmp() }, {}).apiAllowedHosts).toEqual([]);
    expect(resolveOptions({ dataDir: tmp(), apiAllowedHosts: ['orchard.lan,studio.local', 'x.internal'] }, {}).apiAllowedHosts).toEqual(['orchard.lan', 'studio.local', 'x.internal']);
    expect(resolveOptions({ dataDir: tmp() }, { ORCHARD_API_ALLOWED_HOSTS: 'a.lan b.lan' }).apiAllowedHosts).toEqual(['a.lan', 'b.lan']);
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

  it('batch and prefix cache: defaults, flags, environment, sizes and clear errors', () => {
    const dir = tmp();
    expect(resolveOptions({ dataDir: dir }, {})).toMatchObject({ batch: 8, prefixCacheBytes: 64 * 2 ** 20 });
    expect(resolveOptions({ dataDir: dir, batch: '4', prefixCache: '1.5GiB' }, {})).toMatchObject({ batch: 4, prefixCacheBytes: 1.5 * 2 ** 30 });
    expect(resolveOptions({ dataDir: dir }, { ORCHARD_BATCH: '2', ORCHARD_PREFIX_CACHE: '0' })).toMatchObject({ batch: 2, prefixCacheBytes: 0 });
    expect(resolveOptions({ dataDir: dir, prefixCache: '512MB' }, {}).prefixCacheBytes).toBe(512e6);
    expect(resolveOptions({ dataDir: dir }, {}).speculate).toBe('off');
    expect(resolveOptions({ dataDir: dir, speculate: 'prompt-lookup' }, {}).speculate).toBe('prompt-lookup');
    expect(resolveOptions({ dataDir: dir }, { ORCHARD_SPECULATE: 'prompt-lookup' }).speculate).toBe('prompt-lookup');
    expect(() => resolveOptions({ dataDir: dir, speculate: 'ngram' }, {})).toThrow(/--speculate must be prompt-lookup, draft, mtp or off/);
    expect(resolveOptions({ dataDir: dir, speculate: 'mtp' }, {}).speculate).toBe('mtp');
    expect(resolveOptions({ dataDir: dir }, {}).draftModel).toBeNull();
    expect(() => resolveOptions({ dataDir: dir, speculate: 'draft' }, {})).toThrow('--speculate draft needs --draft-model <dir> (or ORCHARD_DRAFT_MODEL)');
    expect(() => resolveOptions({ dataDir: dir, draftModel: join(dir, 'nowhere') }, {})).toThrow(`--draft-model ${join(dir, 'nowhere')}: no such file or directory`);
    expect(resolveOptions({ dataDir: dir }, { ORCHARD_SPECULATE: 'draft', ORCHARD_DRAFT_MODEL: dir })).toMatchObject({ speculate: 'draft', draftModel: dir });
    expect(() => resolveOptions({ dataDir: dir, batch: '0' }, {})).toThrow(/--batch must be at least 1/);
    expect(() => resolveOptions({ dataDir: dir, prefixCache: 'lots' }, {})).toThrow(/--prefix-cache must be a size such as 64MiB/);
  });
});
