/**
 * The node's runner backend and GPU profile: the setting read from the environment, GPU-visible memory
 * from the OS, the GPU copy bandwidth replacing the CPU figure in the planner's cluster JSON, and — on
 * lavapipe, allowed explicitly — a measured GPU profile that the profile schema accepts.
 */
import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { chooseGpu } from '@orchard/engine';
import { backendSettingOf, resolveNodeBackend } from '../../src/backend/node.js';
import { OptionsError, resolveOptions } from '../../src/config/options.js';
import { gpuVisibleMemory, nodeGpuSchema, parseNvidiaSmiMemory, type NodeGpu } from '../../src/profile/gpu.js';
import { nodeProfileSchema } from '../../src/profile/types.js';
import { applyEvents } from '../../src/state/apply.js';
import { clusterView } from '../../src/state/cluster-view.js';
import { emptyState } from '../../src/state/types.js';
import { profile } from '../state/fixtures.js';
import { formatStatus, type StatusJson } from '../../src/cli/format-status.js';
import { openTestGpu } from '../gpu-env.js';

/** The backend setting as the daemon's options resolve it from the environment (data dir: a fresh temp dir). */
const nodeBackendSetting = (env: NodeJS.ProcessEnv) => backendSettingOf(resolveOptions({ dataDir: os.tmpdir() + '/orchard-backend-setting-test' }, env));

describe('backend setting from the environment', () => {
  it('defaults to auto; ORCHARD_ENGINE_BACKEND wins over ORCHARD_BACKEND; threads and software flag', () => {
    expect(nodeBackendSetting({})).toEqual({ name: 'auto', allowSoftware: false, threads: undefined });
    expect(nodeBackendSetting({ ORCHARD_BACKEND: 'gpu' }).name).toBe('gpu');
    expect(nodeBackendSetting({ ORCHARD_BACKEND: 'gpu', ORCHARD_ENGINE_BACKEND: 'reference' }).name).toBe('reference');
    expect(nodeBackendSetting({ ORCHARD_ENGINE_BACKEND: 'cpu', ORCHARD_ENGINE_THREADS: '3', ORCHARD_ALLOW_SOFTWARE_GPU: '1' })).toEqual({ name: 'cpu', allowSoftware: true, threads: 3 });
  });
  it('an unknown name is an error naming the variable', () => {
    expect(() => nodeBackendSetting({ ORCHARD_BACKEND: 'cuda' })).toThrow(OptionsError);
    expect(() => nodeBackendSetting({ ORCHARD_BACKEND: 'cuda' })).toThrow(/ORCHARD_BACKEND must be one of auto, cpu, gpu, reference, wasm, got "cuda"/);
  });
  it('cpu, wasm and reference never touch the GPU', async () => {
    expect(await resolveNodeBackend({ name: 'cpu', allowSoftware: true })).toMatchObject({ kind: 'wasm', gpu: null, note: null });
    expect(await resolveNodeBackend({ name: 'reference', allowSoftware: true })).toMatchObject({ kind: 'reference', gpu: null });
  });
});

describe('GPU-visible memory from the OS', () => {
  const adapter = (o: Partial<{ vendor: string; description: string; software: boolean }>) => ({ vendor: '', architecture: '', device: '', description: '', software: false, ...o });
  const none = { run: async () => null, vram: () => null, totalmem: () => 64 * 2 ** 30 };
  it('unified memory on macOS, system memory for a software adapter', async () => {
    expect(await gpuVisibleMemory(adapter({ vendor: 'apple' }), { ...none, platform: 'darwin' })).toEqual({ memoryBytes: 64 * 2 ** 30, memorySource: 'unified memory' });
    expect(await gpuVisibleMemory(adapter({ software: true }), { ...none, platform: 'linux' })).toMatchObject({ memorySource: 'system memory (software adapter)' });
  });
  it('nvidia-smi for NVIDIA, amdgpu sysfs VRAM otherwise, null when nothing says', async () => {
    expect(parseNvidiaSmiMemory('24564\n81559\n')).toBe(81559 * 2 ** 20);
    const nv = await gpuVisibleMemory(adapter({ vendor: 'nvidia' }), { ...none, platform: 'linux', run: async (cmd) => (cmd === 'nvidia-smi' ? '24564\n' : null) });
    expect(nv).toEqual({ memoryBytes: 24564 * 2 ** 20, memorySource: 'nvidia-smi' });
    expect(await gpuVisibleMemory(adapter({ vendor: 'amd' }), { ...none, platform: 'linux', vram: () => 16 * 2 ** 30 })).toEqual({ memoryBytes: 16 * 2 ** 30, memorySource: 'amdgpu vram' });
    expect(await gpuVisibleMemory(adapter({ vendor: 'someone' }), { ...none, platform: 'linux' })).toEqual({ memoryBytes: null, memorySource: 'unknown' });
  });
});

describe("planner's node bandwidth", () => {
  const gpu: NodeGpu = {
    adapter: 'Apple M4 Max',
    vendor: 'apple',
    architecture: 'metal-3',
    software: false,
    memoryBytes: 128 * 2 ** 30,
    memorySource: 'unified memory',
    copyBandwidthGBps: 412.5,
    maxBufferBytes: 2 ** 34,
    maxStorageBindingBytes: 2 ** 32,
    measuredAt: 1,
  };
  it('is the GPU copy bandwidth when runners use the GPU, the CPU copy figure otherwise', () => {
    const state = applyEvents(emptyState, [
      { type: 'profile-updated', profile: profile('A', 'cpu-node') },
      { type: 'profile-updated', profile: profile('B', 'gpu-node', { gpu }) },
    ]);
    const v = clusterView(state, { mode: 'open', coordinator: 'A' });
    expect(v.nodes.map((n) => n.memoryBandwidthGBps)).toEqual([10, 412.5]);
  });
  it('a discrete GPU bounds the memory the planner may fill; unified memory does not', () => {
    const nvidia: NodeGpu = { ...gpu, adapter: 'NVIDIA H200', vendor: 'nvidia', memoryBytes: 24 * 2 ** 30, memorySource: 'nvidia-smi' };
    const state = applyEvents(emptyState, [
      { type: 'profile-updated', profile: profile('A', 'mac', { gpu }) },
      { type: 'profile-updated', profile: profile('B', 'linux-nvidia', { gpu: nvidia, memory: { totalBytes: 128 * 2 ** 30, availableBytes: 100 * 2 ** 30 } }) },
    ]);
    const v = clusterView(state, { mode: 'open', coordinator: 'A' });
    expect(v.nodes.map((n) => [n.memoryBytes, n.availableBytes])).toEqual([
      [16 * 2 ** 30, 12 * 2 ** 30],
      [24 * 2 ** 30, 24 * 2 ** 30],
    ]);
  });
  it('orchard status names the GPU runners use and its bandwidth', () => {
    const s = {
      self: { peerId: 'A', name: 'alpha' },
      mode: 'open',
      clusterKeyId: null,
      coordinator: 'A',
      nodes: [
        { peerId: 'A', name: 'alpha', status: 'live', joinedAt: 1, leftAt: null, leftReason: null, profile: profile('A', 'alpha', { gpu }) },
        { peerId: 'B', name: 'beta', status: 'live', joinedAt: 1, leftAt: null, leftReason: null, profile: profile('B', 'beta') },
      ],
      links: [],
      notInCluster: [],
      unreachable: [],
      duplicateIdentity: null,
      thunderboltCables: [],
    } as unknown as StatusJson;
    const text = formatStatus(s);
    expect(text).toMatch(/runners on GPU Apple M4 Max, 412\.5 GB\/s copy, 128(\.0)? GiB GPU-visible/);
    expect(text.match(/runners on GPU/g)).toHaveLength(1);
  });
  it('profiles with and without the gpu field validate (older daemons send none)', () => {
    expect(nodeProfileSchema.safeParse(profile('A')).success).toBe(true);
    expect(nodeProfileSchema.safeParse(profile('A', 'a', { gpu })).success).toBe(true);
    expect(nodeProfileSchema.safeParse(profile('A', 'a', { gpu: { ...gpu, copyBandwidthGBps: -1 } })).success).toBe(false);
  });
});

// lavapipe, if installed: Vulkan pointed at it in this process only.
const { ctx: probe, skip } = await openTestGpu();
probe?.destroy();
const hardware = skip ? null : (await chooseGpu('auto')).ctx;
hardware?.destroy();

describe.skipIf(!!skip)(`node backend on a software adapter${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('gpu with the software adapter allowed: a measured GPU profile', async () => {
    const b = await resolveNodeBackend({ name: 'gpu', allowSoftware: true }, { copyBytes: 8 << 20 });
    expect(b.kind).toBe('gpu');
    expect(b.gpu).not.toBeNull();
    expect(nodeGpuSchema.parse(b.gpu)).toEqual(b.gpu);
    expect(b.gpu!.software).toBe(true);
    expect(b.gpu!.adapter).toMatch(/llvmpipe|lavapipe/);
    expect(b.gpu!.copyBandwidthGBps).toBeGreaterThan(0.05);
    expect(b.gpu!.memoryBytes).toBe(os.totalmem());
    expect(b.gpu!.maxStorageBindingBytes).toBeGreaterThan(0);
  });
  it.skipIf(hardware !== null)('auto does not take the software adapter unless allowed', async () => {
    const b = await resolveNodeBackend({ name: 'auto', allowSoftware: false });
    expect(b).toMatchObject({ kind: 'wasm', gpu: null });
    expect(b.note).toMatch(/software/);
    expect((await resolveNodeBackend({ name: 'auto', allowSoftware: true }, { copyBytes: 8 << 20 })).kind).toBe('gpu');
  });
});
