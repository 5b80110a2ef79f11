/**
 * A runner process that cannot load its model says so, typed, before it would report ready: the
 * daemon's handle rejects with a RunnerLoadError that names the file (config.json, tokenizer.json,
 * model.safetensors) and marks it the files' fault, and the process exits. Before, a runner without
 * tokenizer.json reported ready and threw later, and the request waited 120 s for nothing.
 */
import { mkdtempSync, rmSync, statSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pipelineStages } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { RunnerLoadError, RunnerProcess } from '../../src/runner/runner-process.js';

let work: string;
const broken: Record<string, string> = {};

beforeAll(() => {
  work = mkdtempSync(join(os.tmpdir(), 'orchard-runner-load-'));
  const make = (name: string) => {
    const dir = join(work, name);
    writeRandomModel(dir, { numLayers: 2, hiddenSize: 64, seed: 4 });
    broken[name] = dir;
    return dir;
  };
  unlinkSync(join(make('no-tokenizer'), 'tokenizer.json'));
  writeFileSync(join(make('bad-tokenizer'), 'tokenizer.json'), JSON.stringify({ model: { type: 'NoSuchModel' } }));
  writeFileSync(join(make('bad-config'), 'config.json'), '{"architectures": ["LlamaForCausalLM"], "hidden_size": ');
  const weights = join(make('truncated'), 'model.safetensors');
  truncateSync(weights, Math.floor(statSync(weights).size / 3));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

const expected: Record<string, RegExp> = {
  'no-tokenizer': /no tokenizer \(looked for tokenizer\.json, tiktoken\.model, tokenizer\.model\)/,
  'bad-tokenizer': /tokenizer\.json: cannot build the tokenizer/,
  'bad-config': /config\.json: not valid JSON/,
  truncated: /model\.safetensors: tensor [\w.]+: truncated/,
};

describe('a runner whose model cannot load', () => {
  it('fails its start with a typed load failure naming the file, and exits', async () => {
    const runners = Object.entries(broken).map(([name, dir]) => ({
      name,
      runner: new RunnerProcess({ modelDir: dir, layout: { stages: pipelineStages(2, 1), tensor: 1 }, rank: 0, groupId: `load-${name}`, secret: 'ef'.repeat(16), listenHost: '127.0.0.1' }),
    }));
    try {
      const outcomes = await Promise.all(
        runners.map(async ({ name, runner }) => {
          const t0 = Date.now();
          const err = await runner.whenReady().then(
            () => null,
            (e: Error) => e,
          );
          const exited = runner.child.exitCode !== null ? true : await new Promise<boolean>((res) => runner.child.once('exit', () => res(true)));
          return { name, err, ms: Date.now() - t0, exited, runner };
        }),
      );
      for (const o of outcomes) {
        expect(o.err, o.name).toBeInstanceOf(RunnerLoadError);
        expect((o.err as RunnerLoadError).files, o.name).toBe(true);
        expect(o.err!.message, o.name).toMatch(/^runner rank 0 could not load the model: /);
        expect(o.err!.message, o.name).toMatch(expected[o.name]);
        expect(o.runner.loadFailure, o.name).toBe(o.err);
        expect(o.runner.ready, o.name).toBe(false);
        expect(o.exited, o.name).toBe(true);
        // Spawning node + tsx is most of it on a loaded machine; the check itself is milliseconds.
        expect(o.ms, o.name).toBeLessThan(30_000);
      }
    } finally {
      await Promise.all(runners.map(({ runner }) => runner.stop(500)));
    }
  }, 60_000);
});
