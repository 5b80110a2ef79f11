import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { WASM_PATH, buildKernels } from '../../wasm/build.js';

describe('kernels.wasm', () => {
  it('is the build of the committed kernels.wat (rebuild: pnpm --filter @orchard/engine build:wasm)', async () => {
    const built = Buffer.from(await buildKernels());
    const committed = readFileSync(WASM_PATH);
    expect(built.equals(committed), 'kernels.wasm is stale').toBe(true);
  });
});
