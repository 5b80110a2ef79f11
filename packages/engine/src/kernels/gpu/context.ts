/**
 * WebGPU device setup through Dawn (the `webgpu` npm package): Metal on macOS, Vulkan on Linux.
 *
 * `auto` takes a hardware adapter only; a software adapter (Mesa's lavapipe/llvmpipe, SwiftShader)
 * is used only with `allowSoftware`, because it runs on the CPU and would be slower than the CPU
 * backends — it exists here so the WGSL kernels can be tested for correctness on machines without a GPU.
 */
// The WebGPU DOM types (GPUDevice, GPUBuffer, …) come in through the webgpu package's declarations.
import type {} from 'webgpu';
import { missingVulkanDriver } from './vulkan-icd.js';

export class GpuUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GpuUnavailableError';
  }
}

export class GpuDeviceLostError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GpuDeviceLostError';
  }
}

export class GpuOutOfMemoryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GpuOutOfMemoryError';
  }
}

/** A request the device refuses (size over a limit, invalid WGSL): a bug or an unsupported shape. */
export class GpuValidationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GpuValidationError';
  }
}

export interface GpuAdapterSummary {
  vendor: string;
  architecture: string;
  device: string;
  description: string;
  /** Runs on the CPU (lavapipe, SwiftShader, or an adapter Dawn flags as fallback). */
  software: boolean;
}

export interface GpuLimits {
  maxStorageBufferBindingSize: number;
  maxBufferSize: number;
  maxComputeWorkgroupStorageSize: number;
  maxComputeInvocationsPerWorkgroup: number;
  maxComputeWorkgroupsPerDimension: number;
  maxStorageBuffersPerShaderStage: number;
}

/**
 * Optional WebGPU features the kernels use when the adapter offers them (each has a fallback path):
 * `shader-f16` (f16 arithmetic and storage in WGSL) and `subgroups` (subgroupAdd and friends: row sums
 * without workgroup memory or barriers). `subgroupMinSize`/`subgroupMaxSize` come from the adapter
 * (0 when unknown).
 */
export interface GpuFeatures {
  f16: boolean;
  subgroups: boolean;
  subgroupMinSize: number;
  subgroupMaxSize: number;
}

export interface GpuContextOptions {
  /** Accept a software (CPU) adapter when no hardware one exists. @default false */
  allowSoftware?: boolean;
  /**
   * Pretend the storage-binding limit is this many bytes (tests use it to exercise tensor splitting
   * without allocating gigabytes). Only lowers the real limit.
   */
  maxBindingBytes?: number;
  /** Leave these optional features off even where offered (tests run the fallback kernels this way). */
  disableFeatures?: ('shader-f16' | 'subgroups')[];
}

export interface GpuContext {
  /** The process-wide Dawn instance the device was opened on (shared by every context). */
  readonly gpu: GPU;
  readonly device: GPUDevice;
  readonly adapter: GpuAdapterSummary;
  /** The limits the device was created with (after `maxBindingBytes`). */
  readonly limits: GpuLimits;
  /** The optional features the device was opened with. */
  readonly features: GpuFeatures;
  /** Resolves with the reason if the device is lost (driver reset, destroy()). */
  readonly lost: Promise<string>;
  /** True once the device was lost or destroyed. */
  isLost(): boolean;
  /** Throws GpuDeviceLostError if the device is gone, so callers fail with a clear message. */
  assertAlive(): void;
  destroy(): void;
}

const SOFTWARE = /llvmpipe|lavapipe|swiftshader|software|softpipe|warp/i;

/** Classifies an adapter from its `info` (also used on info reported by a probe in another process). */
export function summarizeAdapter(adapter: { info?: Partial<GPUAdapterInfo> & { isFallbackAdapter?: boolean } }): GpuAdapterSummary {
  return summarize(adapter as GPUAdapter);
}

function summarize(adapter: GPUAdapter): GpuAdapterSummary {
  const info = adapter.info;
  const vendor = info?.vendor ?? '';
  const architecture = info?.architecture ?? '';
  const device = info?.device ?? '';
  const description = info?.description ?? '';
  const fallback = Boolean((info as { isFallbackAdapter?: boolean } | undefined)?.isFallbackAdapter);
  const software = fallback || SOFTWARE.test(`${vendor} ${architecture} ${device} ${description}`);
  return { vendor, architecture, device, description, software };
}

export function describeAdapter(a: GpuAdapterSummary): string {
  const name = a.description || a.device || a.architecture || a.vendor || 'unknown adapter';
  return `${name}${a.software ? ' (software)' : ''}`;
}

const LINUX_HINT =
  ' (Linux: needs a Vulkan driver; for the CPU-only lavapipe driver install Mesa 25 mesa-vulkan-drivers and set VK_ICD_FILENAMES)';

type Dawn = { create(options: string[]): GPU };

async function loadDawn(): Promise<Dawn> {
  try {
    return (await import('webgpu')) as unknown as Dawn;
  } catch (err) {
    throw new GpuUnavailableError(
      `WebGPU (Dawn) is not available on ${process.platform}-${process.arch}: ${(err as Error).message}`,
    );
  }
}

/**
 * One Dawn instance per process, created on first use and never released. dawn.node frees an instance
 * when its GPU object is garbage-collected, but callbacks the instance queued on the event loop can
 * still run afterwards and touch the freed memory: a vitest worker died that way under load (SIGSEGV in
 * dawn::native::CallbackTaskManager::Flush via AsyncRunner, once in about ten runs of the GPU suites).
 * Devices are opened and destroyed per context; the instance they come from stays. A process with a
 * live instance and no live device still exits normally (tested in context.test.ts).
 */
let instance: Promise<GPU> | undefined;

function dawnInstance(): Promise<GPU> {
  if (!instance) {
    instance = loadDawn().then((dawn) => dawn.create(process.platform === 'linux' ? ['backend=vulkan'] : []));
    // A failed load is not cached, so a later call reports the same clear error again.
    instance.catch(() => (instance = undefined));
  }
  return instance;
}

/** Finds an adapter and opens a device with the largest buffer limits the adapter offers. */
export async function createGpuContext(options: GpuContextOptions = {}): Promise<GpuContext> {
  if (process.platform === 'linux') {
    const missing = missingVulkanDriver();
    if (missing) throw new GpuUnavailableError(`no WebGPU adapter found: ${missing}${LINUX_HINT}`);
  }
  const gpu = await dawnInstance();

  let adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter && options.allowSoftware) adapter = await gpu.requestAdapter({ forceFallbackAdapter: true });
  if (!adapter) {
    const hint = process.platform === 'linux' ? LINUX_HINT : '';
    throw new GpuUnavailableError(`no WebGPU adapter found${hint}`);
  }
  const summary = summarize(adapter);
  if (summary.software && !options.allowSoftware) {
    throw new GpuUnavailableError(
      `only a software WebGPU adapter was found (${describeAdapter(summary)}); it runs on the CPU, so it is used only when asked for`,
    );
  }

  const a = adapter.limits;
  const requiredLimits: Record<string, number> = {
    maxStorageBufferBindingSize: a.maxStorageBufferBindingSize,
    maxBufferSize: a.maxBufferSize,
    maxComputeWorkgroupStorageSize: a.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: a.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupSizeX: a.maxComputeWorkgroupSizeX,
    maxStorageBuffersPerShaderStage: a.maxStorageBuffersPerShaderStage,
  };
  const wanted = (['shader-f16', 'subgroups'] as const).filter((f) => adapter.features.has(f) && !options.disableFeatures?.includes(f));
  let device: GPUDevice;
  try {
    device = await adapter.requestDevice({ requiredLimits, requiredFeatures: wanted as GPUFeatureName[] });
  } catch (err) {
    throw new GpuUnavailableError(`could not open a device on ${describeAdapter(summary)}: ${(err as Error).message}`);
  }

  const d = device.limits;
  const limits: GpuLimits = {
    maxStorageBufferBindingSize: Math.min(d.maxStorageBufferBindingSize, options.maxBindingBytes ?? Infinity),
    maxBufferSize: d.maxBufferSize,
    maxComputeWorkgroupStorageSize: d.maxComputeWorkgroupStorageSize,
    maxComputeInvocationsPerWorkgroup: d.maxComputeInvocationsPerWorkgroup,
    maxComputeWorkgroupsPerDimension: d.maxComputeWorkgroupsPerDimension,
    maxStorageBuffersPerShaderStage: d.maxStorageBuffersPerShaderStage,
  };

  const info = adapter.info as GPUAdapterInfo & { subgroupMinSize?: number; subgroupMaxSize?: number };
  const features: GpuFeatures = {
    f16: device.features.has('shader-f16'),
    subgroups: device.features.has('subgroups'),
    subgroupMinSize: info?.subgroupMinSize ?? 0,
    subgroupMaxSize: info?.subgroupMaxSize ?? 0,
  };

  let lostReason: string | null = null;
  let destroyed = false;
  const lost = device.lost.then((info) => {
    lostReason = destroyed ? 'destroyed' : `${info.reason}: ${info.message}`;
    return lostReason;
  });
  // Errors not caught by an error scope would otherwise only be printed by Dawn; keep the last one so
  // the next readback can report it.
  device.onuncapturederror = (ev: GPUUncapturedErrorEvent) => {
    pendingError ??= ev.error;
  };
  let pendingError: GPUError | null = null;

  return {
    // The process-wide instance (see dawnInstance).
    gpu,
    device,
    adapter: summary,
    limits,
    features,
    lost,
    isLost: () => lostReason !== null || destroyed,
    assertAlive() {
      if (destroyed) throw new GpuDeviceLostError('GPU device was destroyed');
      if (lostReason !== null) throw new GpuDeviceLostError(`GPU device lost (${lostReason}) on ${describeAdapter(summary)}`);
      if (pendingError) {
        const e = pendingError;
        pendingError = null;
        if (e.constructor?.name === 'GPUOutOfMemoryError') throw new GpuOutOfMemoryError(`GPU out of memory: ${e.message}`);
        throw new GpuValidationError(`GPU error: ${e.message}`);
      }
    },
    destroy() {
      if (destroyed) return;
      destroyed = true;
      device.destroy();
    },
  };
}

/**
 * Runs `fn` inside out-of-memory and validation error scopes and turns a captured error into a
 * typed, readable one. `what` names the allocation (tensor name, buffer role).
 */
export async function guarded<T>(ctx: GpuContext, what: string, fn: () => T): Promise<T> {
  ctx.assertAlive();
  const { device } = ctx;
  device.pushErrorScope('out-of-memory');
  device.pushErrorScope('validation');
  let value: T;
  try {
    value = fn();
  } finally {
    // Both scopes are popped before awaiting, so concurrent callers cannot interleave with them.
    const [validation, oom] = await Promise.all([device.popErrorScope(), device.popErrorScope()]);
    if (oom) throw new GpuOutOfMemoryError(`GPU out of memory allocating ${what}: ${oom.message}`);
    if (validation) throw new GpuValidationError(`GPU rejected ${what}: ${validation.message}`);
  }
  return value;
}
