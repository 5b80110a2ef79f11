/**
 * Which compute backend a model runs on, shared by `orchard run`, `orchard start` and the runners.
 * `reference` and `wasm` are the CPU kernels (plain TypeScript / WASM SIMD + threads); `cpu` is the fast
 * CPU backend (wasm); `gpu` is WebGPU and fails if no adapter can be opened; `auto` takes a hardware GPU
 * adapter when one exists and the CPU otherwise. A software adapter (Mesa's lavapipe) is used only with
 * `allowSoftware`, under `gpu` or `auto` alike — it runs on the CPU and is slower than `wasm`.
 */
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import {
  chooseGpu,
  createGpuContext,
  describeAdapter,
  GpuUnavailableError,
  missingVulkanDriver,
  summarizeAdapter,
  type GpuAdapterSummary,
  type GpuContext,
} from '@orchard/engine';

export const BACKEND_NAMES = ['auto', 'cpu', 'gpu', 'reference', 'wasm'] as const;
export type BackendName = (typeof BACKEND_NAMES)[number];
export type CpuKernels = 'reference' | 'wasm';

export function isBackendName(v: string): v is BackendName {
  return (BACKEND_NAMES as readonly string[]).includes(v);
}

/** The CPU kernels a backend name means when no GPU is used. */
export function cpuKernelsOf(name: BackendName): CpuKernels {
  return name === 'reference' ? 'reference' : 'wasm';
}

export function wantsGpu(name: BackendName): boolean {
  return name === 'gpu' || name === 'auto';
}

export type BackendChoice =
  | { kind: 'gpu'; ctx: GpuContext }
  /** `fallback`: why `auto` did not use a GPU (null when the CPU was asked for). */
  | { kind: 'cpu'; kernels: CpuKernels; fallback: string | null };

/**
 * Resolves `name` to a GPU context or CPU kernels. `gpu` throws GpuUnavailableError (or another Gpu*
 * error) when no adapter can be used; `auto` never throws for GPU reasons and says why in `fallback`.
 */
export async function chooseBackend(name: BackendName, o: { allowSoftware?: boolean } = {}): Promise<BackendChoice> {
  if (!wantsGpu(name)) return { kind: 'cpu', kernels: cpuKernelsOf(name), fallback: null };
  if (name === 'gpu') {
    const { ctx } = await chooseGpu('gpu', { allowSoftware: o.allowSoftware });
    return { kind: 'gpu', ctx: ctx! };
  }
  if (!o.allowSoftware) {
    const seen = await probeAdapter();
    if (seen.adapter === null || seen.adapter.software) return { kind: 'cpu', kernels: 'wasm', fallback: seen.reason };
    const c = await chooseGpu('auto');
    return c.ctx ? { kind: 'gpu', ctx: c.ctx } : { kind: 'cpu', kernels: 'wasm', fallback: c.reason };
  }
  try {
    return { kind: 'gpu', ctx: await createGpuContext({ allowSoftware: true }) };
  } catch (err) {
    const reason = err instanceof GpuUnavailableError ? err.message : `GPU unusable: ${(err as Error).message}`;
    return { kind: 'cpu', kernels: 'wasm', fallback: reason };
  }
}

/** True for the engine's typed GPU errors (no adapter, device lost, out of memory, over a limit). */
export function isGpuError(err: unknown): err is Error {
  return err instanceof Error && /^Gpu(Unavailable|DeviceLost|OutOfMemory|Validation)Error$/.test(err.name);
}

const PROBE = join(dirname(fileURLToPath(import.meta.url)), 'adapter-probe.mjs');

/**
 * The adapter `auto` would get, looked up in a child process so that a machine without a hardware GPU
 * hears nothing from Dawn (it prints native warnings while enumerating software adapters). No Vulkan
 * driver at all on Linux is known without starting anything. A probe that fails or hangs means no GPU.
 */
export async function probeAdapter(timeoutMs = 20_000): Promise<{ adapter: GpuAdapterSummary | null; reason: string }> {
  if (process.platform === 'linux') {
    const missing = missingVulkanDriver();
    if (missing) return { adapter: null, reason: `no WebGPU adapter found: ${missing}` };
  }
  let webgpu: string;
  try {
    const engine = fileURLToPath(import.meta.resolve('@orchard/engine'));
    webgpu = pathToFileURL(createRequire(engine).resolve('webgpu')).href;
  } catch (err) {
    return { adapter: null, reason: `WebGPU (Dawn) is not installed: ${(err as Error).message}` };
  }
  const out = await new Promise<string | null>((resolve) => {
    // The environment is handed on, not read: the probe child must see the adapter the runners will
    // (Vulkan/Dawn variables such as VK_ICD_FILENAMES). An allowed process.env use (test/config/env-readers.test.ts).
    execFile(process.execPath, [PROBE, webgpu], { timeout: timeoutMs, env: process.env }, (err, stdout) => resolve(err ? null : stdout));
  });
  let info: Parameters<typeof summarizeAdapter>[0]['info'] | null = null;
  try {
    info = out === null ? null : (JSON.parse(out.trim().split('\n').pop()!) as { info: typeof info }).info;
  } catch {
    info = null;
  }
  if (out === null) return { adapter: null, reason: 'the WebGPU adapter probe failed or timed out' };
  if (!info) return { adapter: null, reason: 'no WebGPU adapter found' };
  const adapter = summarizeAdapter({ info });
  if (adapter.software) return { adapter, reason: `only a software WebGPU adapter was found (${describeAdapter(adapter)}); it is used only when asked for` };
  return { adapter, reason: '' };
}
