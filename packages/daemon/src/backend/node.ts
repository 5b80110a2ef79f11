/**
 * The compute backend of this node's runners, decided once when the daemon starts: from
 * `orchard start --backend` / ORCHARD_ENGINE_BACKEND (ORCHARD_BACKEND is read as the same setting),
 * ORCHARD_ENGINE_THREADS and ORCHARD_ALLOW_SOFTWARE_GPU=1. When it resolves to a GPU, the adapter is
 * profiled (profileGpu: measured copy bandwidth) for the node profile, and the device is closed again —
 * each runner opens its own.
 */
import { profileGpu } from '@orchard/engine';
import { gpuVisibleMemory, type NodeGpu } from '../profile/gpu.js';
import { chooseBackend, isBackendName, isGpuError, BACKEND_NAMES, type BackendName } from './select.js';

export interface NodeBackendSetting {
  name: BackendName;
  allowSoftware: boolean;
  threads?: number;
}

export class BackendSettingError extends Error {}

/** Reads the setting from the environment; an unknown name is an error naming the variable. */
export function nodeBackendSetting(env: NodeJS.ProcessEnv = process.env): NodeBackendSetting {
  const which = env.ORCHARD_ENGINE_BACKEND ? 'ORCHARD_ENGINE_BACKEND' : env.ORCHARD_BACKEND ? 'ORCHARD_BACKEND' : null;
  const raw = which ? env[which]!.trim() : 'auto';
  if (!isBackendName(raw)) throw new BackendSettingError(`${which} must be one of ${BACKEND_NAMES.join(', ')}, got ${JSON.stringify(raw)}`);
  const threads = Number(env.ORCHARD_ENGINE_THREADS);
  return {
    name: raw,
    allowSoftware: /^(1|true|yes)$/i.test(env.ORCHARD_ALLOW_SOFTWARE_GPU ?? ''),
    threads: threads > 0 ? Math.floor(threads) : undefined,
  };
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

/** The node backend for the current environment, resolved once per process and setting. */
export function nodeBackend(env: NodeJS.ProcessEnv = process.env): Promise<NodeBackend> {
  const s = nodeBackendSetting(env);
  const key = JSON.stringify(s);
  let p = resolved.get(key);
  if (!p) {
    p = resolveNodeBackend(s);
    resolved.set(key, p);
  }
  return p;
}
