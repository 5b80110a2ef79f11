import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, exampleCluster } from './helpers.js';

/** `pnpm orchard plan ...` in a child process, as a user would run it. */
function orchard(args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync('pnpm', ['-s', 'orchard', 'plan', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const fixtures = 'packages/partitioner/test/fixtures';

describe('orchard plan (CLI)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'orchard-plan-cli-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('prints the --json contract for a good input', () => {
    const r = orchard(['--model', `${fixtures}/deepseek-v3.1.json`, '--cluster', 'examples/clusters/4x-m3-ultra-tb5-rdma.json', '--bits', '4', '--json']);
    expect(r.code).toBe(0);
    const p = JSON.parse(r.stdout);
    expect(p.strategy).toBe('tensor');
    expect(p.stages[0]).toMatchObject({ nodes: expect.any(Array), layers: [0, 61], tensorParallel: 4, transport: 'rdma' });
    expect(p.predicted).toMatchObject({ decodeTokensPerSecond: expect.any(Number), prefillTokensPerSecond: expect.any(Number), ttftMs: expect.any(Number) });
    for (const id of p.stages[0].nodes) expect(p.memory[id]).toMatchObject({ weightsBytes: expect.any(Number), kvCacheBytes: expect.any(Number), totalBytes: expect.any(Number) });
    expect(p.alternatives.length).toBeGreaterThan(0);
    for (const a of p.alternatives) expect(a).toMatchObject({ strategy: expect.any(String), rejected: expect.any(String) });
  });

  it('exits 2 naming the offending field of a bad cluster file', () => {
    const c = exampleCluster('2x-m4-max-tb5-rdma') as unknown as { links: { kind: string }[] };
    c.links[0].kind = 'usb';
    const file = join(dir, 'bad.json');
    writeFileSync(file, JSON.stringify(c));
    const r = orchard(['--model', `${fixtures}/llama-3.1-8b.json`, '--cluster', file, '--json']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout).error).toMatch(/links\[0\]\.kind/);
    const human = orchard(['--model', `${fixtures}/llama-3.1-8b.json`, '--cluster', file]);
    expect(human.code).toBe(2);
    expect(human.stderr).toMatch(/links\[0\]\.kind/);
    expect(human.stderr).not.toMatch(/at .*\.ts:\d+/); // no stack trace
  });

  it('exits 2 naming the model file and field of a bad config', () => {
    const model = join(dir, 'model');
    mkdirSync(model);
    writeFileSync(join(model, 'config.json'), JSON.stringify({ num_hidden_layers: 2, hidden_size: 'big' }));
    const r = orchard(['--model', model, '--cluster', 'examples/clusters/2x-m4-max-tb5-rdma.json', '--json']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout).error).toBe(`model config ${join(model, 'config.json')}: hidden_size must be a positive integer, got "big"`);
  });

  it('exits 2 with bytes needed vs available when nothing fits', () => {
    const r = orchard(['--model', `${fixtures}/kimi-k2-thinking.json`, '--cluster', 'examples/clusters/2x-m4-max-tb5-tcp.json', '--json']);
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout).error).toMatch(/needs [\d.]+ GB .* has [\d.]+ GB available/);
  });

  it('prints a stage table in human mode', () => {
    const r = orchard(['--model', `${fixtures}/llama-3.3-70b.json`, '--cluster', 'examples/clusters/mixed-desk.json', '--bits', '4']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/strategy: tensor/);
    expect(r.stdout).toMatch(/stage\s+nodes\s+layers/);
    expect(r.stdout).toMatch(/alternatives:/);
  });
});
