/**
 * Builds kernels.wasm from kernels.wat with the pinned `wabt` npm package (no system tools), so the
 * binary is reproducible on any machine: `pnpm --filter @orchard/engine build:wasm`.
 * `--check` rebuilds in memory and fails when the committed kernels.wasm differs (CI freshness check;
 * test/wasm/fresh.test.ts runs the same comparison).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import wabtInit from 'wabt';

export const WAT_PATH = fileURLToPath(new URL('./kernels.wat', import.meta.url));
export const WASM_PATH = fileURLToPath(new URL('./kernels.wasm', import.meta.url));

const FEATURES = { simd: true, threads: true } as const;

export async function buildKernels(): Promise<Uint8Array> {
  const wabt = await wabtInit();
  const mod = wabt.parseWat('kernels.wat', readFileSync(WAT_PATH, 'utf8'), FEATURES);
  try {
    mod.resolveNames();
    // wabt's typings omit validate's feature argument; without it shared memory fails validation.
    (mod as unknown as { validate(features: object): void }).validate(FEATURES);
    // No debug names: the binary then depends only on the code, not on label spelling.
    const { buffer } = mod.toBinary({ log: false, write_debug_names: false });
    return new Uint8Array(buffer);
  } finally {
    mod.destroy();
  }
}

async function main(): Promise<void> {
  const built = await buildKernels();
  if (process.argv.includes('--check')) {
    const committed = new Uint8Array(readFileSync(WASM_PATH));
    if (Buffer.compare(Buffer.from(built), Buffer.from(committed)) !== 0) {
      console.error(`${WASM_PATH} is stale: run \`pnpm --filter @orchard/engine build:wasm\` and commit it`);
      process.exit(1);
    }
    console.log(`${WASM_PATH} is fresh (${built.length} bytes)`);
    return;
  }
  writeFileSync(WASM_PATH, built);
  console.log(`wrote ${WASM_PATH} (${built.length} bytes)`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  });
}
