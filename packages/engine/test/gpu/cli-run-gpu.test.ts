/**
 * `orchard run --backend gpu|auto|cpu` in child processes: on lavapipe (a software adapter, asked for
 * with --allow-software-gpu) the GPU gives the same greedy tokens as the CPU reference backend, unsplit
 * and split; `auto` never takes the software adapter on its own; with no Vulkan driver `auto` falls back
 * to the CPU with a one-line note and `gpu` is a one-line error.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createWasmBackend, generate, loadInProcessModel } from '../../src/index.js';
import { writeRandomModel } from '../../src/testing/index.js';
import { chooseGpu } from '../../src/kernels/gpu/probe.js';
import { tempDir } from '../helpers.js';
import { openTestGpu } from './gpu-env.js';

const exec = promisify(execFile);
const root = resolve(import.meta.dirname, '../../../..');
const tsx = join(root, 'node_modules/.bin/tsx');
const main = join(root, 'packages/daemon/src/cli/main.ts');

// Sets VK_ICD_FILENAMES to lavapipe in this process (children inherit it) and tells whether it works.
const gpu = await openTestGpu();
gpu.ctx?.destroy();
// Only meaningful where no hardware adapter exists (then `auto` must refuse the software one).
const hardware = gpu.ctx ? (await chooseGpu('auto')).ctx : null;
hardware?.destroy();

const tmp = tempDir('cli-gpu');
afterAll(tmp.cleanup);

async function orchard(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await exec(tsx, [main, ...args], { cwd: root, timeout: 120_000, env: { ...process.env, ...env } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout: string; stderr: string };
    return { code: typeof err.code === 'number' ? err.code : -1, stdout: err.stdout, stderr: err.stderr };
  }
}

/** Dawn's own native warnings (lavapipe's limits) go to stderr too; the lines that are ours. */
const ours = (stderr: string) => stderr.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('Warning: '));

const prompt = [72, 101, 108, 108, 111, 44, 32, 119];
const greedy = ['--prompt-ids', prompt.join(','), '--max-tokens', '12', '--temperature', '0', '--ignore-eos', '--json'];
const model = writeRandomModel(join(tmp.dir, 'llama'), { variant: 'llama', numLayers: 4, seed: 5 });

async function referenceTokens(dir: string): Promise<string> {
  const m = loadInProcessModel(dir);
  const r = await generate(m, prompt, { maxTokens: 12, temperature: 0, stopTokenIds: [] });
  return `${JSON.stringify({ tokens: r.tokens })}\n`;
}

describe.skipIf(!gpu.ctx)(`orchard run on the GPU (lavapipe)${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  it('--backend gpu --allow-software-gpu equals the reference backend on a random model, unsplit and 2 stages x 2 ranks', async () => {
    const want = await referenceTokens(model.dir);
    const [plain, split] = await Promise.all([
      orchard(['run', '--model', model.dir, ...greedy, '--backend', 'gpu', '--allow-software-gpu']),
      orchard(['run', '--model', model.dir, ...greedy, '--backend', 'gpu', '--allow-software-gpu', '--pipeline', '2', '--tensor', '2']),
    ]);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toBe(want);
    expect(plain.stderr).toMatch(/gpu backend on llvmpipe.*pipeline 1 × tensor 1/);
    expect(split.code, split.stderr).toBe(0);
    expect(split.stdout).toBe(want);
    expect(split.stderr).toMatch(/gpu backend on .*pipeline 2 × tensor 2/);
  });

  const demo = join(root, 'models/orchard-demo');
  it.skipIf(!existsSync(join(demo, 'model.safetensors')))('--backend gpu equals --backend reference on models/orchard-demo', async () => {
    const [ref, onGpu] = await Promise.all([
      orchard(['run', ...greedy, '--max-tokens', '24', '--backend', 'reference']),
      orchard(['run', ...greedy, '--max-tokens', '24', '--backend', 'gpu', '--allow-software-gpu']),
    ]);
    expect(ref.code, ref.stderr).toBe(0);
    expect(onGpu.code, onGpu.stderr).toBe(0);
    expect(JSON.parse(onGpu.stdout).tokens).toHaveLength(24);
    expect(onGpu.stdout).toBe(ref.stdout);
  });

  it.skipIf(hardware !== null)('--backend auto (the default) uses the software adapter only with --allow-software-gpu', async () => {
    const [byDefault, auto, allowed] = await Promise.all([
      orchard(['run', '--model', model.dir, ...greedy]),
      orchard(['run', '--model', model.dir, ...greedy, '--backend', 'auto']),
      orchard(['run', '--model', model.dir, ...greedy, '--backend', 'auto', '--allow-software-gpu']),
    ]);
    // The default says nothing about the GPU it did not use (and Dawn's warnings stay in the probe process).
    expect(byDefault.code, byDefault.stderr).toBe(0);
    expect(byDefault.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^orchard run: .*\(wasm backend, pipeline 1 × tensor 1/)]);
    expect(auto.code, auto.stderr).toBe(0);
    expect(auto.stdout).toBe(byDefault.stdout);
    const lines = auto.stderr.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^orchard run: no GPU used \(only a software WebGPU adapter.*llvmpipe.*\); running on the CPU \(wasm backend\)$/);
    expect(lines[1]).toMatch(/\(wasm backend, pipeline/);
    expect(allowed.code, allowed.stderr).toBe(0);
    expect(allowed.stderr).toMatch(/gpu backend on llvmpipe/);
    expect(allowed.stdout).toBe(await referenceTokens(model.dir));
  });
});

describe('orchard run with no Vulkan driver', () => {
  const noDriver = { VK_ICD_FILENAMES: join(tmp.dir, 'no-such-icd.json'), VK_DRIVER_FILES: '' };
  it.runIf(process.platform === 'linux')('--backend auto falls back to the CPU with a one-line note; --backend gpu is a one-line error', async () => {
    const wasm = loadInProcessModel(model.dir, { backend: () => createWasmBackend({ threads: 1 }) });
    const want = await generate(wasm, prompt, { maxTokens: 12, temperature: 0, stopTokenIds: [] });
    wasm.dispose();
    const [auto, onGpu] = await Promise.all([
      orchard(['run', '--model', model.dir, ...greedy, '--backend', 'auto', '--threads', '1', '--allow-software-gpu'], noDriver),
      orchard(['run', '--model', model.dir, ...greedy, '--backend', 'gpu', '--allow-software-gpu'], noDriver),
    ]);
    expect(auto.code, auto.stderr).toBe(0);
    expect(auto.stdout).toBe(`${JSON.stringify({ tokens: want.tokens })}\n`);
    const lines = auto.stderr.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^orchard run: no GPU used \(no WebGPU adapter found: no Vulkan driver.*\); running on the CPU \(wasm backend\)$/);
    expect(lines[1]).toMatch(/tokens\/s \(wasm backend/);

    expect(onGpu.code).toBe(1);
    expect(onGpu.stdout).toBe('');
    expect(onGpu.stderr.trim().split('\n')).toHaveLength(1);
    expect(onGpu.stderr).toMatch(/--backend gpu: no WebGPU adapter found: no Vulkan driver.*no-such-icd\.json/);
    expect(onGpu.stderr).not.toMatch(/\n\s+at /);
  });
});
