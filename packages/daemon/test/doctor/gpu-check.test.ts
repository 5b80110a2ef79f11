/** orchard doctor's GPU line: ok on a hardware adapter, a warning with the fix otherwise, never a failure. */
import { describe, expect, it } from 'vitest';
import { checkGpu, type DoctorEnv } from '../../src/doctor/index.js';

const env = (platform: NodeJS.Platform, gpu?: DoctorEnv['gpuAdapter']) => ({ platform, gpuAdapter: gpu }) as unknown as DoctorEnv;

describe('doctor: GPU', () => {
  it('a hardware adapter is ok', async () => {
    const r = await checkGpu(env('darwin', async () => ({ adapter: { name: 'Apple M4 Max', software: false }, reason: '' })));
    expect(r).toMatchObject({ id: 'gpu', status: 'ok' });
    expect(r.detail).toMatch(/Apple M4 Max/);
  });
  it('software only or no driver warns, with the Linux driver fix', async () => {
    const soft = await checkGpu(env('linux', async () => ({ adapter: { name: 'llvmpipe (software)', software: true }, reason: 'only a software WebGPU adapter was found' })));
    expect(soft).toMatchObject({ status: 'warn' });
    expect(soft.detail).toMatch(/only a software.*runners use the CPU/);
    expect(soft.fix).toMatch(/Vulkan driver/);
    const none = await checkGpu(env('linux', async () => ({ adapter: null, reason: 'no WebGPU adapter found: no Vulkan driver installed' })));
    expect(none).toMatchObject({ status: 'warn' });
    expect(none.detail).toMatch(/no Vulkan driver/);
  });
  it('not probed when the environment cannot', async () => {
    expect(await checkGpu(env('linux'))).toMatchObject({ status: 'skip' });
  });
});
