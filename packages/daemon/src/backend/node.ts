/**
 * The compute backend of this node's runners, decided once when the daemon starts from its options
 * (`--backend` / ORCHARD_ENGINE_BACKEND, ORCHARD_ENGINE_THREADS, ORCHARD_ALLOW_SOFTWARE_GPU=1; read in
 * config/options.ts). When it resolves to a GPU, the adapter is
 * profiled (profileGpu: measured copy bandwidth) for the node profile, and the device is closed again —
 * each runner opens its own.
 */
import { profileGpu } from '@orchard/engine';
import { gpuVisibleMemory, type NodeGpu } from '../profile/gpu.js';
import { chooseBackend, isGpuError, type BackendName } from './select.js';

export interface NodeBackendSetting {
  name: BackendName;
  allowSoftware: boolean;
  threads?: number;
}

/** The runners' backend as the daemon's options set it (flags > environment > config file). */
export function backendSettingOf(o: { backend: BackendName; allowSoftwareGpu: boolean; engineThreads: number | null }): NodeBackendSetting {
  return { name: o.backend, allowSoftware: o.allowSoftwareGpu, threads: o.engineThreads ?? undefined };
}

export interface NodeBackend {
  /** What the runners are told. */
  kind: 'reference' | 'wasm' | 'gpu';
  allowSoftware: boolean;
  threads?: number;
  /** The profiled GPU when kind is gpu, else null. */
  gpu: NodeGpu | null;
  /** Why a GPU was not used (auto, or a gpu setting that could not be honoured), for the log. */
  note: string | null;
}

/**
 * Resolves the setting on this machine. A `gpu` setting that cannot be honoured falls back to the CPU
 * (wasm) with a note rather than stopping the daemon.
 */
export async function resolveNodeBackend(setting: NodeBackendSetting, o: { copyBytes?: number } = {}): Promise<NodeBackend> {
  const base = { allowSoftware: setting.allowSoftware, threads: setting.threads };
  let choice;
  try {
    choice = await chooseBackend(setting.name, { allowSoftware: setting.allowSoftware });
  } catch (err) {
    if (!isGpuError(err)) throw err;
    return { ...base, kind: 'wasm', gpu: null, note: `backend gpu asked for but unusable (${err.message}); runners use the CPU (wasm)` };
  }
  if (choice.kind === 'cpu') return { ...base, kind: choice.kernels, gpu: null, note: choice.fallback && `no GPU used (${choice.fallback}); runners use the CPU (wasm)` };
  const ctx = choice.ctx;
  try {
    const p = await profileGpu(ctx, o.copyBytes);
    const mem = await gpuVisibleMemory(ctx.adapter);
    const gpu: NodeGpu = {
      adapter: p.name,
      vendor: ctx.adapter.vendor,
      architecture: ctx.adapter.architecture,
      software: ctx.adapter.software,
      ...mem,
      copyBandwidthGBps: p.copyBandwidth / 1e9,
      maxBufferBytes: p.maxBufferSize,
      maxStorageBindingBytes: p.maxStorageBufferBindingSize,
      measuredAt: Date.now(),
    };
    return { ...base, kind: 'gpu', gpu, note: null };
  } catch (err) {
    if (!isGpuError(err)) throw err;
    return { ...base, kind: 'wasm', gpu: null, note: `GPU profiling failed (${err.message}); runners use the CPU (wasm)` };
  } finally {
    ctx.destroy();
  }
}

const resolved = new Map<string, Promise<NodeBackend>>();

/** The node backend for a setting, resolved once per process and setting. */
export function nodeBackend(s: NodeBackendSetting): Promise<NodeBackend> {
  const key = JSON.stringify(s);
  let p = resolved.get(key);
  if (!p) {
    p = resolveNodeBackend(s);
    resolved.set(key, p);
  }
  return p;
}
