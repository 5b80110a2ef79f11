/** The client commands' settings: read once in config/cli.ts, and every --url takes its default from there. */
import os from 'node:os';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { afterEach, describe, expect, it } from 'vitest';
import { cliSettings, DEFAULT_URL } from '../../src/config/cli.js';
import { DEFAULT_API_PORT, resolveOptions } from '../../src/config/options.js';
import { buildProgram } from '../../src/cli/main.js';

const saved = process.env.ORCHARD_URL;
afterEach(() => {
  if (saved === undefined) delete process.env.ORCHARD_URL;
  else process.env.ORCHARD_URL = saved;
});

function urlDefaults(cmd: Command, path = ''): [string, unknown][] {
  const here = cmd.options.filter((o) => o.long === '--url').map((o): [string, unknown] => [`${path}${cmd.name()}`, o.defaultValue]);
  return [...here, ...cmd.commands.flatMap((c) => urlDefaults(c, `${path}${cmd.name()} `))];
}

describe('the CLI settings', () => {
  it('talk to the daemon on its default API port unless ORCHARD_URL says otherwise', () => {
    expect(DEFAULT_URL).toBe(`http://127.0.0.1:${DEFAULT_API_PORT}`);
    expect(cliSettings({}).url).toBe(DEFAULT_URL);
    expect(cliSettings({ ORCHARD_URL: 'http://pod.lan:9000' }).url).toBe('http://pod.lan:9000');
  });

  it('resolve the data dir, token and hub as `orchard start` does', () => {
    expect(cliSettings({}).dataDir).toBe(join(os.homedir(), '.orchard'));
    expect(cliSettings({ ORCHARD_DATA_DIR: 'rel/dir' }).dataDir).toBe(resolve('rel/dir'));
    expect(cliSettings({ ORCHARD_API_TOKEN: 't' }).apiToken).toBe('t');
    for (const env of [{}, { HF_ENDPOINT: 'http://mirror.lan/', HUGGING_FACE_HUB_TOKEN: 'old' }, { HF_ENDPOINT: '', HF_TOKEN: 'new', HUGGING_FACE_HUB_TOKEN: 'old' }]) {
      const daemon = resolveOptions({ dataDir: os.tmpdir() }, { ...env, ORCHARD_CONFIG: '' });
      expect(cliSettings(env).hub).toEqual({ endpoint: daemon.hfEndpoint, token: daemon.hfToken });
    }
    expect(cliSettings({ HF_ENDPOINT: 'http://mirror.lan/' }).hub).toEqual({ endpoint: 'http://mirror.lan', token: null });
  });

  it('give every command with --url the same default, ORCHARD_URL when set', () => {
    process.env.ORCHARD_URL = 'http://from-env.test:1234';
    const defaults = urlDefaults(buildProgram());
    expect(defaults.length).toBeGreaterThanOrEqual(11);
    expect(defaults.filter(([, v]) => v !== 'http://from-env.test:1234')).toEqual([]);
    delete process.env.ORCHARD_URL;
    expect(urlDefaults(buildProgram()).filter(([, v]) => v !== DEFAULT_URL)).toEqual([]);
  });
});
