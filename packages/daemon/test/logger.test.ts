import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.js';
import { resolveOptions } from '../src/config/options.js';

function sink(isTTY: boolean) {
  const lines: string[] = [];
  const stream = Object.assign(
    new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    }),
    { isTTY },
  );
  return { stream, text: () => lines.join('') };
}

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(os.tmpdir(), 'orchard-log-'));
  dirs.push(d);
  return d;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('the daemon log', () => {
  it('is readable on a terminal: time, level, message and fields on one line, no JSON', () => {
    const out = sink(true);
    const log = createLogger({ out: out.stream, file: null, format: 'auto' });
    log.info({ model: 'orchard-demo', tokens: 12 }, 'request');
    // A terminal gets colours (NO_COLOR aside); the words are the same without them.
    expect(out.text()).toMatch(process.env.NO_COLOR ? /^\[/ : /\x1b\[32mINFO/);
    const line = out.text().replace(/\x1b\[[0-9;]*m/g, '');
    expect(line).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: request \{.*"model":"orchard-demo".*"tokens":12.*\}\n$/);
    expect(line).not.toMatch(/"pid"|"level":30/);
  });

  it('is JSON lines off a terminal, and with --log-format json on one', () => {
    for (const [isTTY, format] of [[false, 'auto'], [true, 'json']] as const) {
      const out = sink(isTTY);
      createLogger({ out: out.stream, file: null, format }).warn({ peer: 'p1' }, 'dropped');
      const entry = JSON.parse(out.text());
      expect(entry).toMatchObject({ level: 40, msg: 'dropped', peer: 'p1' });
      expect(typeof entry.time).toBe('number');
    }
  });

  it('writes the JSON file too, rotated by size, 5 old files kept', async () => {
    const dir = tmp();
    const file = join(dir, 'logs', 'orchard.log');
    const out = sink(true);
    const log = createLogger({ out: out.stream, file, format: 'none', rotateBytes: 1024 });
    for (let i = 0; i < 400; i++) {
      log.info({ i, pad: 'x'.repeat(40) }, 'entry');
      if (i % 20 === 0) await new Promise((r) => setTimeout(r, 5));
    }
    expect(out.text()).toBe('');
    // Rotation renames files in the background: wait until the set settles.
    const want = ['orchard.log', 'orchard.log.1', 'orchard.log.2', 'orchard.log.3', 'orchard.log.4', 'orchard.log.5'];
    // and until the last entry has reached the current file (writes are asynchronous too).
    const lastLine = () => (existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').at(-1) ?? '' : '');
    const settled = () => JSON.stringify(readdirSync(join(dir, 'logs')).sort()) === JSON.stringify(want) && lastLine().includes('"i":399');
    for (let t = 0; t < 150 && !settled(); t++) await new Promise((r) => setTimeout(r, 100));
    const files = readdirSync(join(dir, 'logs')).sort();
    expect(files).toEqual(['orchard.log', 'orchard.log.1', 'orchard.log.2', 'orchard.log.3', 'orchard.log.4', 'orchard.log.5']);
    const last = readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    expect(last.at(-1)).toMatchObject({ msg: 'entry', i: 399 });
    expect(readFileSync(join(dir, 'logs', 'orchard.log.1'), 'utf8').length).toBeLessThan(2048);
  });

  it('options: the file defaults into the data dir, none turns it off, a bad format is named', () => {
    const dataDir = tmp();
    const o = resolveOptions({ dataDir }, {});
    expect(o.logFile).toBe(join(dataDir, 'logs', 'orchard.log'));
    expect(o.logFormat).toBe('auto');
    expect(resolveOptions({ dataDir, logFile: 'none' } as never, {}).logFile).toBeNull();
    expect(resolveOptions({ dataDir }, { ORCHARD_LOG_FORMAT: 'json' }).logFormat).toBe('json');
    expect(() => resolveOptions({ dataDir, logFormat: 'fancy' } as never, {})).toThrow(/--log-format must be auto, pretty, json or none/);
    expect(existsSync(join(dataDir, 'logs'))).toBe(false);
  });
});
