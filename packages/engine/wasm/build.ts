/**
 * Builds the kernel binaries from kernels.wat with the pinned `wabt` npm package (no system tools), so
 * they are reproducible on any machine: `pnpm --filter @orchard/engine build:wasm`.
 * One source, two builds: kernels.wasm (WASM SIMD 128, runs everywhere) and kernels-relaxed.wasm (the
 * same kernels, with relaxed SIMD where a kernel has a `;; @if relaxed` branch; variants.ts).
 * `--check` rebuilds both in memory and fails when a committed binary differs (CI freshness check;
 * test/wasm/fresh.test.ts runs the same comparison).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import wabtInit from 'wabt';
import { type SimdVariant, SIMD_VARIANTS, selectVariant } from './variants.js';

export const WAT_PATH = fileURLToPath(new URL('./kernels.wat', import.meta.url));
export const WASM_PATHS: Record<SimdVariant, string> = {
  baseline: fileURLToPath(new URL('./kernels.wasm', import.meta.url)),
  relaxed: fileURLToPath(new URL('./kernels-relaxed.wasm', import.meta.url)),
};

const FEATURES: Record<SimdVariant, object> = {
  baseline: { simd: true, threads: true },
  relaxed: { simd: true, threads: true, relaxed_simd: true },
};

export async function buildKernels(variant: SimdVariant = 'baseline'): Promise<Uint8Array> {
  const wabt = await wabtInit();
  const features = FEATURES[variant];
  const wat = selectVariant(readFileSync(WAT_PATH, 'utf8'), variant, WAT_PATH);
  const mod = wabt.parseWat(variant === 'baseline' ? 'kernels.wat' : `kernels.wat (${variant})`, wat, features);
  try {
    mod.resolveNames();
    // wabt's typings omit validate's feature argument; without it shared memory fails validation.
    (mod as unknown as { validate(features: object): void }).validate(features);
    // No debug names: the binary then depends only on the code, not on label spelling.
    const { buffer } = mod.toBinary({ log: false, write_debug_names: false });
    return new Uint8Array(buffer);
  } finally {
    mod.destroy();
  }
}

async function main(): Promise<void> {
  const check = process.argv.includes('--check');
  let stale = false;
  for (const variant of SIMD_VARIANTS) {
    const built = await buildKernels(variant);
    const path = WASM_PATHS[variant];
    if (!check) {
      writeFileSync(path, built);
      console.log(`wrote ${path} (${built.length} bytes)`);
    } else if (!existsSync(path) || Buffer.compare(Buffer.from(built), readFileSync(path)) !== 0) {
      console.error(`${path} is stale: run \`pnpm --filter @orchard/engine build:wasm\` and commit it`);
      stale = true;
    } else {
      console.log(`${path} is fresh (${built.length} bytes)`);
    }
  }
  if (stale) process.exit(1);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
