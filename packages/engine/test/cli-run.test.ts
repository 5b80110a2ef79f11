/** `orchard run` in a child process: the --json contract, split flags, streamed text, and one-line errors. */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, truncateSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createWasmBackend, generate, loadInProcessModel } from '../src/index.js';
import { writeRandomModel } from '../src/testing/index.js';
import { tempDir } from './helpers.js';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../../..');
const tsx = join(root, 'node_modules/.bin/tsx');
const main = join(root, 'packages/daemon/src/cli/main.ts');

const tmp = tempDir('cli');
afterAll(tmp.cleanup);
const info = writeRandomModel(join(tmp.dir, 'm'), { variant: 'qwen2', numLayers: 2, seed: 21 });

async function orchard(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(tsx, [main, ...args], { cwd: root, timeout: 60_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout: string; stderr: string };
    return { code: typeof err.code === 'number' ? err.code : -1, stdout: err.stdout, stderr: err.stderr };
  }
}

describe('orchard run', () => {
  it('--json prints exactly the greedy generated ids, and --pipeline/--tensor give the same', async () => {
    const prompt = [72, 101, 108, 108, 111];
    const expected = await generate(loadInProcessModel(info.dir), prompt, { maxTokens: 12, stopTokenIds: [] });
    const args = ['run', '--model', info.dir, '--prompt-ids', prompt.join(','), '--max-tokens', '12', '--temperature', '0', '--ignore-eos', '--json', '--backend', 'reference'];
    const plain = await orchard(args);
    expect(plain.code).toBe(0);
    expect(plain.stdout).toBe(`${JSON.stringify({ tokens: expected.tokens })}\n`);
    expect(plain.stderr).toMatch(/tokens\/s/);
    const split = await orchard([...args, '--pipeline', '2', '--tensor', '2']);
    expect(split.stdout).toBe(plain.stdout);
    const lookup = await orchard([...args, '--prompt-lookup']);
    expect(lookup.stdout).toBe(plain.stdout);
    expect(lookup.stderr).toMatch(/prompt lookup: \d+ of \d+ drafted tokens accepted/);
  });

  it("--mtp drafts with a DeepSeek-V3 checkpoint's multi-token-prediction layer: the same ids; without the layer, a one-line error", async () => {
    const ds = writeRandomModel(join(tmp.dir, 'ds'), { variant: 'deepseek-v3', numLayers: 2, seed: 21, mtpLayers: 1 });
    const args = ['run', '--model', ds.dir, '--prompt-ids', '72,101,108,108,111', '--max-tokens', '10', '--temperature', '0', '--ignore-eos', '--json', '--backend', 'reference'];
    const plain = await orchard(args);
    expect(plain.code).toBe(0);
    const mtp = await orchard([...args, '--mtp']);
    expect(mtp.code).toBe(0);
    expect(mtp.stdout).toBe(plain.stdout);
    expect(mtp.stderr).toMatch(/MTP drafts: \d+ of \d+ drafted tokens accepted/);
    const none = await orchard(['run', '--model', info.dir, '--prompt-ids', '72,101', '--max-tokens', '2', '--backend', 'reference', '--mtp']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/no multi-token-prediction layer/);
  });

  it('--backend wasm runs the same generation on the WASM kernels', async () => {
    const prompt = [10, 20, 30];
    const wasm = loadInProcessModel(info.dir, { backend: () => createWasmBackend({ threads: 1 }) });
    const expected = await generate(wasm, prompt, { maxTokens: 8, stopTokenIds: [] });
    wasm.dispose();
    const r = await orchard(['run', '--model', info.dir, '--prompt-ids', prompt.join(','), '--max-tokens', '8', '--temperature', '0', '--ignore-eos', '--json', '--backend', 'wasm', '--threads', '1']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`${JSON.stringify({ tokens: expected.tokens })}\n`);
    expect(r.stderr).toMatch(/wasm backend/);
    const bad = await orchard(['run', '--model', info.dir, '--prompt', 'x', '--backend', 'gpu9000']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--backend must be one of auto, cpu, gpu, reference, wasm, got "gpu9000"/);
  });

  it('streams text for --prompt (same seed, same text)', async () => {
    const args = ['run', '--model', info.dir, '--prompt', 'Once', '--max-tokens', '10', '--seed', '3', '--ignore-eos'];
    const a = await orchard(args);
    const b = await orchard(args);
    expect(a.code).toBe(0);
    expect(a.stdout.length).toBeGreaterThan(1);
    expect(b.stdout).toBe(a.stdout);
  });

  it('a truncated weights file is a one-line error naming file and tensor, no stack', async () => {
    const bad = writeRandomModel(join(tmp.dir, 'bad'), { numLayers: 2, seed: 1 });
    const path = join(bad.dir, 'model.safetensors');
    truncateSync(path, readFileSync(path).length - 10);
    const r = await orchard(['run', '--model', bad.dir, '--prompt-ids', '1', '--json']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/model\.safetensors.*lm_head\.weight.*truncated/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });

  it('bad flags and out-of-vocabulary ids are usage errors', async () => {
    const r = await orchard(['run', '--model', info.dir, '--prompt-ids', '1,99999', '--json']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/token id 99999 is outside the vocabulary/);
    const t = await orchard(['run', '--model', info.dir, '--prompt', 'x', '--temperature', 'hot']);
    expect(t.code).toBe(2);
    expect(t.stderr).toMatch(/--temperature/);
  });

  const bundled = join(root, 'models/orchard-demo/model.safetensors');
  it.skipIf(!existsSync(bundled))('on the bundled demo model (the default --model) writes English-looking text', async () => {
    const r = await orchard(['run', '--prompt', 'And God said, Let there be', '--max-tokens', '60', '--seed', '1']);
    expect(r.code).toBe(0);
    const text = r.stdout.trim();
    expect(text.length).toBeGreaterThan(30);
    const letters = text.match(/[A-Za-z ,.;:'\n]/g)?.length ?? 0;
    expect(letters / text.length).toBeGreaterThan(0.9);
    expect(text).toMatch(/\b(the|and|of|unto)\b/);
  });
});
