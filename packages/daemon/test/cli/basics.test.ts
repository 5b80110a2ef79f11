/** The CLI as a first-time user meets it: bare `orchard`, --version, --help with examples, colours. */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import { colorsWanted } from '../../src/colors.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = join(ROOT, 'bin/orchard.js');
const orchard = (args: string[], env: Record<string, string> = {}) => {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '', FORCE_COLOR: '', ...env }, timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
};

async function inProcess(args: string[]) {
  let out = '';
  let err = '';
  const o = vi.spyOn(process.stdout, 'write').mockImplementation((s) => ((out += String(s)), true));
  const e = vi.spyOn(process.stderr, 'write').mockImplementation((s) => ((err += String(s)), true));
  try {
    return { code: await main(args), out, err };
  } finally {
    o.mockRestore();
    e.mockRestore();
  }
}

describe('orchard as a command', () => {
  it('bare orchard (the installed bin) prints the overview with examples and exits 0; FORCE_COLOR colours it', () => {
    const r = orchard([], { FORCE_COLOR: '1' });
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/\x1b\[1mExamples:/);
    const plain = r.out.replace(/\x1b\[[0-9;]*m/g, '');
    expect(plain).toMatch(/^Usage: orchard \[options\] \[command\]/);
    expect(plain).toMatch(/Examples:\n {2}\$ orchard start/);
    expect(plain).toMatch(/^ {2}chat \[options\] \[model\]/m);
  }, 60_000);

  it('--version and -v print the package version', async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    for (const flag of ['--version', '-v']) {
      const r = await inProcess([flag]);
      expect(r.code).toBe(0);
      expect(r.out.trim()).toBe(`orchard ${version} (Node.js ${process.versions.node})`);
    }
  });

  it('a command help ends with examples, without colours off a terminal', async () => {
    const r = await inProcess(['pull', '--help']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/Examples:\n {2}\$ orchard pull Qwen\/Qwen2\.5-0\.5B-Instruct/);
    expect(r.out).not.toMatch(/\x1b\[/);
  });

  it('an unknown command is an error with help, exit 1', async () => {
    const r = await inProcess(['frobnicate']);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/unknown command 'frobnicate'/);
  });

  it('decides colours per stream: a terminal, unless NO_COLOR; FORCE_COLOR anywhere; never on TERM=dumb', () => {
    expect(colorsWanted({ isTTY: true }, {})).toBe(true);
    expect(colorsWanted({ isTTY: false }, {})).toBe(false);
    expect(colorsWanted({ isTTY: true }, { NO_COLOR: '1' })).toBe(false);
    expect(colorsWanted({ isTTY: true }, { TERM: 'dumb' })).toBe(false);
    expect(colorsWanted({ isTTY: false }, { FORCE_COLOR: '1' })).toBe(true);
    expect(colorsWanted({ isTTY: false }, { FORCE_COLOR: '0' })).toBe(false);
    // CI=true alone is not a reason (picocolors' own rule would colour CI logs).
    expect(colorsWanted({ isTTY: false }, { CI: 'true' })).toBe(false);
  });
});
