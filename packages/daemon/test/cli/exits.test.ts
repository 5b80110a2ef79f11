/**
 * Every command ends when its work is done: `orchard pull` exits right after its result line (no
 * hashing worker left holding the process), a failed pull leaves no empty model folder, and a reader
 * that closes the pipe early (`orchard ... | head`) ends the command quietly, without an EPIPE trace.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeRandomModel } from '@orchard/engine/testing';
import { startFakeHub, type FakeHub } from '../../../../test/harness/fake-hub.js';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '../../bin/orchard.js');

interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  err: string;
  /** ms from the last byte on stdout to the process's exit. */
  afterLastOut: number;
}

/** The installed command as a person runs it, with a deadline so a hang fails the test instead of stalling it. */
function orchard(args: string[], env: Record<string, string | undefined>, opts: { closeStdout?: boolean; deadlineMs?: number } = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let lastOut = Date.now();
    // `| head` that has read enough: the reading end goes away before the command writes.
    if (opts.closeStdout) child.stdout.destroy();
    else
      child.stdout.on('data', (d) => {
        out += String(d);
        lastOut = Date.now();
      });
    child.stderr.on('data', (d) => (err += String(d)));
    const deadline = setTimeout(() => child.kill('SIGKILL'), opts.deadlineMs ?? 90_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(deadline);
      resolve({ code, signal, out, err, afterLastOut: Date.now() - lastOut });
    });
  });
}

let work: string;
let hub: FakeHub;
beforeAll(async () => {
  work = mkdtempSync(join(os.tmpdir(), 'orchard-exits-'));
  // Over 8 MiB, so its chunks are 256 KiB and large enough to be hashed on the worker threads.
  writeRandomModel(join(work, 'src'), { hiddenSize: 256, intermediateSize: 1024, numLayers: 3, numHeads: 4, numKvHeads: 2, seed: 5 });
  hub = await startFakeHub({ 'test/exits': join(work, 'src') });
});
afterAll(async () => {
  await hub?.close();
  rmSync(work, { recursive: true, force: true });
});

// Concurrent: each test is mostly a child process starting up.
describe.concurrent('commands end when their work is done', () => {
  it('orchard pull exits within 2 s of printing its result', async () => {
    const r = await orchard(['pull', 'test/exits', '--data-dir', join(work, 'data')], { HF_ENDPOINT: hub.url, HF_TOKEN: undefined });
    expect(r.signal, `killed at the deadline, still running after: ${r.out}`).toBeNull();
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/✓ test\/exits@[0-9a-f]{12} in .* from the hub\)/);
    expect(hub.servedBytes.get('model.safetensors')).toBeGreaterThan(8 << 20);
    expect(r.afterLastOut).toBeLessThan(2000);
  }, 120_000);

  it('a pull that fails leaves no empty model folder, and keeps folders that were there', async () => {
    const data = join(work, 'data-failed');
    mkdirSync(join(data, 'models', 'test', 'kept'), { recursive: true });
    // And an unreachable hub, into a data dir with nothing in it yet: nothing is left under models/ either.
    const fresh = join(work, 'data-fresh');
    const [r, down] = await Promise.all([
      orchard(['pull', 'test/missing', '--data-dir', data], { HF_ENDPOINT: hub.url, HF_TOKEN: undefined }),
      orchard(['pull', 'other/model', '--data-dir', fresh], { HF_ENDPOINT: 'http://127.0.0.1:9', HF_TOKEN: undefined }),
    ]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/test\/missing: not found on .* \(HTTP 404\)/);
    expect(readdirSync(join(data, 'models', 'test'))).toEqual(['kept']);
    expect(down.code).toBe(1);
    expect(down.err).toMatch(/cannot reach the hub/);
    expect(existsSync(join(fresh, 'models', 'other'))).toBe(false);
  }, 120_000);

  it('a closed stdout (`orchard run --help | head`) ends the command quietly with status 0', async () => {
    const r = await orchard(['run', '--help'], {}, { closeStdout: true });
    expect(r.err).not.toMatch(/EPIPE|Unhandled|at .*\(node:/);
    expect(r.code).toBe(0);
  }, 120_000);
});
