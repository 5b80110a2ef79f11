/**
 * `orchard plan MODEL --machine NAME[xN]`: named Macs (models/machines.ts) become a cluster joined by
 * Thunderbolt 5 TCP; the CLI answers fits / does not fit with the plan, and --json adds `fits` and
 * `machines` to the plan's shape. Models are the catalog's own config.json files (models/configs/).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { lookupChip } from '@orchard/partitioner';
import { makePlan } from '../../src/cli/commands/plan.js';
import { main } from '../../src/cli/main.js';
import { MACHINES, MachineError, TB5_TCP, gpuBudgetBytes, machineCluster, parseMachines } from '../../src/models/machines.js';

const root = resolve(import.meta.dirname, '../../../..');
const QWEN_MOE = join(root, 'models/configs/qwen3-30b-a3b.json');
const DEEPSEEK = join(root, 'models/configs/deepseek-v3.json');
const work = mkdtempSync(join(tmpdir(), 'orchard-plan-machines-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** `orchard plan ARGS` in this process (the command's own code path, without a process start). */
async function orchardPlan(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => ((stdout += String(chunk)), true));
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => ((stderr += String(chunk)), true));
  try {
    const code = await main(['plan', ...args]);
    return { code: code || Number(process.exitCode ?? 0), stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
    process.exitCode = undefined;
  }
}

/** The real `orchard plan` process. */
async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(join(root, 'node_modules/.bin/tsx'), [join(root, 'packages/daemon/src/cli/main.ts'), 'plan', ...args], { cwd: root, timeout: 100_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('named Macs as a cluster', () => {
  it('NAMExN and a repeated --machine name the same Macs; unknown names and counts are refused by name', () => {
    expect(parseMachines(['m4-max-128x2', 'm4-pro-64']).map((m) => m.name)).toEqual(['m4-max-128', 'm4-max-128', 'm4-pro-64']);
    expect(parseMachines(['m4-max-128', 'M4-Max-128'])).toEqual(parseMachines(['m4-max-128x2']));
    expect(() => parseMachines(['m9-max-128'])).toThrow(MachineError);
    expect(() => parseMachines(['m9-max-128'])).toThrow(/--machine m9-max-128: unknown machine; known: .*m3-ultra-512/);
    expect(() => parseMachines(['m4-pro-64x0'])).toThrow(/the count must be 1 to 16/);
  });

  it('every machine is a chip the cost model knows, with the GPU share of its memory available', () => {
    for (const m of MACHINES) expect(lookupChip(m.chip)?.class, m.name).toBe('apple');
    const cluster = machineCluster(parseMachines(['m3-ultra-512x2', 'mac-mini-m4-16']));
    expect(cluster.nodes.map((n) => n.id)).toEqual(['m3-ultra-512-1', 'm3-ultra-512-2', 'mac-mini-m4-16']);
    expect(cluster.nodes[0]).toMatchObject({ memoryBytes: 512 * 2 ** 30, availableBytes: 384 * 2 ** 30, memoryBandwidthGBps: 819 });
    expect(cluster.nodes[2]).toMatchObject({ memoryBytes: 16 * 2 ** 30, memoryBandwidthGBps: 120 });
    expect(cluster.nodes[2].availableBytes).toBe(gpuBudgetBytes(16));
    expect(gpuBudgetBytes(16)).toBeLessThan(0.7 * 16 * 2 ** 30);
    // every pair cabled, Thunderbolt 5 over TCP
    expect(cluster.links).toHaveLength(3);
    for (const l of cluster.links) expect(l).toMatchObject(TB5_TCP);
  });

  it('plans for named Macs exactly as for the same cluster written to a file; faster memory, faster decode', async () => {
    const file = join(work, 'macs.json');
    writeFileSync(file, JSON.stringify(machineCluster(parseMachines(['m4-max-128x2']))));
    const named = await makePlan({ model: QWEN_MOE, bits: '4', machine: ['m4-max-128x2'] });
    expect(named).toEqual(await makePlan({ model: QWEN_MOE, bits: '4', cluster: file }));
    const pro = await makePlan({ model: QWEN_MOE, bits: '4', machine: ['m4-pro-64'] });
    const max = await makePlan({ model: QWEN_MOE, bits: '4', machine: ['m4-max-128'] });
    expect(max.predicted.decodeTokensPerSecond).toBeGreaterThan(pro.predicted.decodeTokensPerSecond * 1.1);
    // 377 GB of DeepSeek weights: one 512 GB Ultra holds them, a 256 GB one does not
    expect((await makePlan({ model: DEEPSEEK, bits: '4', machine: ['m3-ultra-512'] })).memory['m3-ultra-512'].weightsBytes).toBeGreaterThan(350e9);
    await expect(makePlan({ model: DEEPSEEK, bits: '4', machine: ['m3-ultra-256'] })).rejects.toThrow(/does not fit/);
  });
});

describe('orchard plan MODEL --machine', () => {
  it('answers fits with the plan and bytes per Mac, or does not fit (exit 2), in text and JSON', async () => {
    const fitsJson = await orchardPlan(QWEN_MOE, '--bits', '4', '--machine', 'mac-mini-m4-32', '--json');
    const noFitJson = await orchardPlan('--model', QWEN_MOE, '--bits', '4', '--machine', 'mac-mini-m4-16', '--json');
    const noFitText = await orchardPlan(QWEN_MOE, '--bits', '4', '--machine', 'mac-mini-m4-16');
    const both = await orchardPlan(QWEN_MOE, '--machine', 'm4-pro-64', '--cluster', join(root, 'examples/clusters/2x-m4-max-tb5-tcp.json'));
    const unknown = await orchardPlan(QWEN_MOE, '--machine', 'm4-max-96', '--json');
    const fitsText = await cli(QWEN_MOE, '--bits', '4', '--machine', 'm4-pro-64', '--machine', 'm4-pro-64');
    expect(fitsJson.code).toBe(0);
    const plan = JSON.parse(fitsJson.stdout);
    expect(plan).toMatchObject({ fits: true, machines: ['mac-mini-m4-32'], strategy: 'single' });
    expect(plan.predicted.decodeTokensPerSecond).toBeGreaterThan(0);
    expect(plan.memory['mac-mini-m4-32'].weightsBytes).toBeGreaterThan(15e9);
    // --json adds fields only: the rest is makePlan's plan
    const { fits: _f, machines: _m, ...rest } = plan;
    expect(rest).toEqual(JSON.parse(JSON.stringify(await makePlan({ model: QWEN_MOE, bits: '4', machine: ['mac-mini-m4-32'] }))));

    expect(noFitJson.code).toBe(2);
    expect(JSON.parse(noFitJson.stdout)).toMatchObject({ fits: false, machines: ['mac-mini-m4-16'], error: expect.stringMatching(/^does not fit on mac-mini-m4-16: .*needs 19\.\d GB/) });

    expect(fitsText.code).toBe(0);
    expect(fitsText.stdout).toMatch(/^fits: yes, on 2x m4-pro-64 \(Thunderbolt 5, TCP\)\nstrategy: \w+ +decode [\d.]+ tok\/s/);
    expect(fitsText.stdout).toMatch(/m4-pro-64-1 +\d/);
    expect(noFitText.code).toBe(2);
    expect(noFitText.stderr).toMatch(/does not fit on mac-mini-m4-16: .*Would fit with/);

    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/either --cluster FILE or --machine NAME/);
    expect(unknown.code).toBe(2);
    expect(JSON.parse(unknown.stdout).error).toMatch(/--machine m4-max-96: unknown machine/);
    expect(JSON.parse(unknown.stdout).fits).toBeUndefined();
  }, 120_000);
});

describe('orchard plan MODEL (no --cluster, no --machine): the running pod', () => {
  it("plans for the daemon's own cluster (GET /api/cluster), and names what to do when no daemon answers", async () => {
    const { createServer } = await import('node:http');
    const pod = machineCluster(parseMachines(['m4-max-128', 'm4-pro-64']));
    const asked: string[] = [];
    const server = createServer((req, res) => {
      asked.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''}`);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify(pod));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      const fits = await orchardPlan(QWEN_MOE, '--bits', '4', '--url', url, '--token', 'tok', '--json');
      expect(fits.code).toBe(0);
      expect(asked).toEqual(['GET /api/cluster Bearer tok']);
      const file = join(work, 'pod.json');
      writeFileSync(file, JSON.stringify(pod));
      const { fits: f, ...rest } = JSON.parse(fits.stdout);
      expect(f).toBe(true);
      expect(rest).toEqual(JSON.parse(JSON.stringify(await makePlan({ model: QWEN_MOE, bits: '4', cluster: file }))));
      const text = await orchardPlan(QWEN_MOE, '--bits', '4', '--url', url);
      expect(text.stdout).toMatch(new RegExp(`^fits: yes, on this pod \\(${url.replace(/[./]/g, '\\$&')}\\)\\n`));
      const tooBig = await orchardPlan(DEEPSEEK, '--bits', '4', '--url', url, '--json');
      expect(tooBig.code).toBe(2);
      expect(JSON.parse(tooBig.stdout)).toMatchObject({ fits: false, error: expect.stringMatching(/^does not fit on this pod/) });
    } finally {
      await new Promise((r) => server.close(r));
    }
    // Nothing listens there now.
    const none = await orchardPlan(QWEN_MOE, '--url', url);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/cannot reach the daemon at .*--machine NAME .* or --cluster FILE/);
  }, 120_000);
});
