/**
 * The planner plans from the engine's description (models/describe.ts over `describeModelFiles`): for
 * the test models it gives the numbers the planner's own reading of config.json + safetensors headers
 * gave before; a GGUF MoE's experts now reach it; a model the engine refuses is sized but marked
 * unsupported with the engine's reason, so placement refuses it.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadModelConfig } from '@orchard/engine';
import { hfToGguf } from '@orchard/engine/gguf';
import { writeAwqModel, writeMlxModel, writeRandomModel, type RandomModelOptions } from '@orchard/engine/testing';
import { withTensorSizes } from '@orchard/partitioner';
import { readTensorSizes } from '@orchard/partitioner/loader';
import { describeModel, engineCapabilities } from '../../src/models/describe.js';

const tmp = mkdtempSync(join(os.tmpdir(), 'orchard-describe-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const VARIANTS: Record<string, RandomModelOptions & { mlx?: boolean }> = {
  llama: { variant: 'llama', numLayers: 4 },
  'llama, two shards': { variant: 'llama', numLayers: 4, shards: 2 },
  'qwen2 bias': { variant: 'qwen2', numLayers: 3 },
  'qwen3 tied': { variant: 'qwen3', numLayers: 4, tiedEmbeddings: true },
  'qwen3-moe': { variant: 'qwen3-moe', numLayers: 4 },
  mixtral: { variant: 'mixtral', numLayers: 3 },
  'deepseek-v3 (MLA)': { variant: 'deepseek-v3', numLayers: 4 },
  'gpt-oss': { variant: 'gpt-oss', numLayers: 4 },
  'qwen3 MLX 4-bit': { variant: 'qwen3', numLayers: 3, mlx: true },
};

describe.each(Object.entries(VARIANTS))('%s', (name, { mlx, ...options }) => {
  let dir = join(tmp, name.replace(/[^a-z0-9]+/gi, '-'));
  writeRandomModel(dir, { seed: 3, ...options });
  if (mlx) writeMlxModel(dir, (dir = `${dir}-mlx`), { bits: 4, groupSize: 32 });

  it("plans with the numbers the planner's own reading of config.json and the headers gave", async () => {
    const model = await describeModel(dir, { name });
    expect(model.unsupported).toBeUndefined();
    const raw = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
    raw.tie_word_embeddings = loadModelConfig(dir).tieWordEmbeddings;
    const before = withTensorSizes(raw, (await readTensorSizes(dir))!, { name });
    expect(model.spec).toEqual(before);
  });
});

describe('GGUF', () => {
  it("a MoE's routed experts reach the planner: every tensor byte of the file is planned", async () => {
    const dir = join(tmp, 'qwen3-moe-gguf');
    writeRandomModel(dir, { variant: 'qwen3-moe', seed: 4, numLayers: 3, mlpOnlyLayers: [] });
    const gguf = join(dir, 'model.gguf');
    const written = hfToGguf(dir, gguf, { dtype: 'f32' });
    const model = await describeModel(gguf);
    const fileBytes = written.tensors.reduce((a, t) => a + t.bytes, 0);
    expect(model.spec.totalBytes).toBe(fileBytes);
    expect(model.spec.format).toBe('exact sizes from GGUF');
    expect(model.spec.moe).toMatchObject({ experts: 8, moeLayers: 3 });
    for (const l of model.spec.layers) expect(l.mlpBytes).toBeGreaterThan(l.bytes / 2); // experts dominate a layer
    // the same model from its Hugging Face directory: same layer structure, f32 both ways
    const hf = await describeModel(dir);
    expect(model.spec.layers.map((l) => l.mlpBytes)).toEqual(hf.spec.layers.map((l) => l.mlpBytes));
  });
});

describe('refused by the engine', () => {
  it('AWQ weights: sized, marked unsupported with the quantization method, no layout offered', async () => {
    const base = join(tmp, 'awq-base');
    writeRandomModel(base, { variant: 'llama', seed: 3, numLayers: 2 });
    const dir = join(tmp, 'awq');
    writeAwqModel(base, dir);
    const model = await describeModel(dir);
    expect(model.unsupported).toMatch(/quant_method "awq" is not supported/);
    expect(model.spec.totalBytes).toBeGreaterThan(0);
    expect(engineCapabilities(model).runnable).toBeUndefined();
  });

  it('a directory with only config.json is planned from its dimensions, not refused', async () => {
    const dir = join(tmp, 'config-only');
    const info = writeRandomModel(join(tmp, 'config-src'), { variant: 'llama', seed: 3, numLayers: 2 });
    rmSync(dir, { recursive: true, force: true });
    writeFileSync(join(tmp, 'config-only.json'), JSON.stringify(info.config));
    const fromFile = await describeModel(join(tmp, 'config-only.json'));
    expect(fromFile.unsupported).toBeUndefined();
    expect(fromFile.spec.bytesFrom).toBe('config');
  });
});
