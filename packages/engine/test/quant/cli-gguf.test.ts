/**
 * `orchard run --model file.gguf` (a Q8_0 GGUF from our converter) in a child process produces the
 * same greedy tokens as in-process generation on the same file, and text prompts go through the
 * tokenizer stored in the GGUF.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createWasmBackend, generate, loadInProcessModel, loadTokenizer } from '@orchard/engine';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeRandomModel } from '@orchard/engine/testing';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
const work = mkdtempSync(join(tmpdir(), 'orchard-cli-gguf-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function orchardRun(args: string[]) {
  return spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'packages/daemon/src/cli/main.ts'), 'run', ...args], { cwd: ROOT, encoding: 'utf8', timeout: 90_000 });
}

describe('orchard run --model file.gguf', () => {
  it('greedy tokens equal in-process generation on the same Q8_0 GGUF; text prompts use its tokenizer', async () => {
    const dir = join(work, 'hf');
    writeRandomModel(dir, { variant: 'llama', hiddenSize: 64, intermediateSize: 128, numLayers: 2, seed: 21 });
    const gguf = join(work, 'model-q8_0.gguf');
    hfToGguf(dir, gguf, { dtype: 'q8_0' });
    const prompt = [10, 200, 33, 7];
    const r = orchardRun(['--model', gguf, '--prompt-ids', prompt.join(','), '--json', '--temperature', '0', '--max-tokens', '12', '--ignore-eos', '--backend', 'wasm', '--threads', '1']);
    expect(r.status, r.stderr).toBe(0);
    const cli = JSON.parse(r.stdout.trim().split('\n').pop()!).tokens as number[];
    const model = loadInProcessModel(gguf, { backend: () => createWasmBackend({ threads: 1 }) });
    try {
      const want = await generate(model, prompt, { maxTokens: 12, temperature: 0, stopTokenIds: [] });
      expect(cli).toEqual(want.tokens);
      expect(cli).toHaveLength(12);
    } finally {
      model.dispose();
    }
    const text = orchardRun(['--model', gguf, '--prompt', 'In the beginning', '--temperature', '0', '--max-tokens', '4', '--backend', 'wasm', '--threads', '1']);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stderr).toMatch(new RegExp(`${loadTokenizer(dir).encode('In the beginning').length} prompt tokens`));
  }, 120_000);
});
