/** The GPU lines of bench:engine: shape and consistency on lavapipe (the values themselves only mean something on a real GPU). */
import { afterAll, describe, expect, it } from 'vitest';
import { runGpuBenchLines } from '../../bench/gpu-lines.js';
import { chooseGpu } from '../../src/kernels/gpu/probe.js';
import { writeRandomModel } from '../../src/testing/index.js';
import { tempDir } from '../helpers.js';
import { openTestGpu } from './gpu-env.js';

const gpu = await openTestGpu();
gpu.ctx?.destroy();
const hardware = gpu.ctx ? (await chooseGpu('auto')).ctx : null;
hardware?.destroy();
const tmp = tempDir('gpu-bench');
afterAll(tmp.cleanup);

describe.skipIf(!gpu.ctx)(`GPU bench lines${gpu.skip ? ` (skipped: ${gpu.skip})` : ''}`, () => {
  it('copy baseline, then decode/prefill/stream per model with ratios from the same run', async () => {
    const m = writeRandomModel(`${tmp.dir}/m`, { numLayers: 2, dtype: 'f16', seed: 4 });
    const models = [{ label: 'tiny', dir: m.dir }, { label: 'big', dir: m.dir, skipOnSoftware: true }];
    const r = await runGpuBenchLines({ models, allowSoftware: true, promptTokens: 8, decodeTokens: 6, rounds: 1 });
    expect(r.skipped).toBeNull();
    expect(r.adapter).toBeTruthy();
    const perModel = (label: string) => [[`gpu-${label}-decode`, 'tok/s'], [`gpu-${label}-prefill`, 'tok/s'], [`gpu-${label}-stream`, 'GB/s']];
    expect(r.lines.map((l) => [l.name, l.unit])).toEqual([['gpu-copy-baseline', 'GB/s'], ...perModel('tiny'), ...(r.software ? [] : perModel('big'))]);
    for (const l of r.lines) expect(l.value).toBeGreaterThan(0);
    const [copy, , , stream] = r.lines;
    // The stream ratio is the stream figure over the copy baseline of the same run (3 significant digits).
    expect(stream.ratio).toBeCloseTo(stream.value / copy.value, 2);
  }, 120_000);

  it.skipIf(hardware !== null)('without allowSoftware and no hardware adapter, no lines and the reason', async () => {
    const r = await runGpuBenchLines({ models: [], allowSoftware: false });
    expect(r.lines).toEqual([]);
    expect(r.skipped).toMatch(/software|adapter/);
  });
});
