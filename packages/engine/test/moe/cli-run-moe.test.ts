/**
 * `orchard run --model DIR --prompt-ids … --temperature 0 --json` in a child process on the
 * mixture-of-experts / latent-attention architectures: with --pipeline / --tensor (experts split over
 * the tensor ranks) the greedy ids equal unsplit in-process generation, and `--backend auto` with a
 * (software) GPU runs them on the GPU with the same ids.
 */
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel } from '../../src/index.js';
import { writeRandomModel, type RandomModelOptions } from '../../src/testing/index.js';
import { useLavapipe } from '../gpu/gpu-env.js';
import { tempDir } from '../helpers.js';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../../../..');
const tsx = join(root, 'node_modules/.bin/tsx');
const main = join(root, 'packages/daemon/src/cli/main.ts');

const tmp = tempDir('cli-moe');
afterAll(tmp.cleanup);

async function orchard(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(tsx, [main, ...args], { cwd: root, timeout: 90_000 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout: string; stderr: string };
    return { code: typeof err.code === 'number' ? err.code : -1, stdout: err.stdout, stderr: err.stderr };
  }
}

const CASES: [string, RandomModelOptions, string[]][] = [
  ['qwen3-moe', { variant: 'qwen3-moe' }, ['--tensor', '2']],
  ['mixtral', { variant: 'mixtral' }, ['--pipeline', '2', '--tensor', '2']],
  ['deepseek-v3', { variant: 'deepseek-v3' }, ['--pipeline', '3', '--tensor', '4']],
  ['gpt-oss', { variant: 'gpt-oss' }, ['--tensor', '4']],
];

describe.each(CASES)('orchard run on %s', (name, options, split) => {
  const dir = join(tmp.dir, name);
  writeRandomModel(dir, { numLayers: 3, seed: 8, ...options });
  const prompt = [84, 104, 101, 32, 111, 114];

  // One child process per architecture (each costs seconds): the split run against in-process unsplit generation.
  it(`--json ${split.join(' ')} gives the unsplit in-process greedy ids`, async () => {
    const expected = await generate(loadInProcessModel(dir), prompt, { maxTokens: 10, stopTokenIds: [] });
    const args = ['run', '--model', dir, '--prompt-ids', prompt.join(','), '--max-tokens', '10', '--temperature', '0', '--ignore-eos', '--json', '--backend', 'reference', ...split];
    const r = await orchard(args);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${JSON.stringify({ tokens: expected.tokens })}\n`);
    expect(r.stderr).toMatch(new RegExp(`pipeline ${split.includes('--pipeline') ? split[split.indexOf('--pipeline') + 1] : 1} × tensor ${split[split.indexOf('--tensor') + 1]}`));
  });
});

describe('--backend auto with a GPU', () => {
  it('runs a latent-attention MoE model on the GPU when one is found (lavapipe here), with the CPU’s greedy ids', async () => {
    useLavapipe(); // the child inherits VK_ICD_FILENAMES / XDG_RUNTIME_DIR where lavapipe exists
    const dir = join(tmp.dir, 'deepseek-v3');
    const prompt = [1, 2, 3];
    const expected = await generate(loadInProcessModel(dir), prompt, { maxTokens: 6, stopTokenIds: [] });
    const r = await orchard(['run', '--model', dir, '--prompt-ids', prompt.join(','), '--max-tokens', '6', '--temperature', '0', '--ignore-eos', '--json', '--backend', 'auto', '--allow-software-gpu']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${JSON.stringify({ tokens: expected.tokens })}\n`);
    expect(r.stderr).not.toMatch(/GPU load failed/);
    // Where no adapter exists at all, auto picks the CPU before trying.
    expect(r.stderr).toMatch(/gpu backend on|wasm backend/);
  });
});
