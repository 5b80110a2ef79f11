import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { WASM_PATH, WAT_PATH, buildKernels } from '../../wasm/build.js';
import { withAffineSection } from '../../wasm/affine.js';
import { withF16Section } from '../../wasm/f16tiles.js';
import { withKquantSection } from '../../wasm/kquants.js';
import { withSection } from '../../wasm/qtiles.js';

describe('kernels.wasm', () => {
  it('is the build of the committed kernels.wat (rebuild: pnpm --filter @orchard/engine build:wasm)', async () => {
    const built = Buffer.from(await buildKernels());
    const committed = readFileSync(WASM_PATH);
    expect(built.equals(committed), 'kernels.wasm is stale').toBe(true);
  });

  it("kernels.wat's q8_0/q4_0 prompt-batch section is wasm/qtiles.ts's output (rewrite: pnpm exec tsx packages/engine/wasm/qtiles.ts)", () => {
    const wat = readFileSync(WAT_PATH, 'utf8');
    expect(withSection(wat) === wat, 'the qtile section is stale').toBe(true);
  });

  it("kernels.wat's K-quant section is wasm/kquants.ts's output (rewrite: pnpm exec tsx packages/engine/wasm/kquants.ts)", () => {
    const wat = readFileSync(WAT_PATH, 'utf8');
    expect(withKquantSection(wat) === wat, 'the kquant section is stale').toBe(true);
  });

  it("kernels.wat's MLX affine section is wasm/affine.ts's output (rewrite: pnpm exec tsx packages/engine/wasm/affine.ts)", () => {
    const wat = readFileSync(WAT_PATH, 'utf8');
    expect(withAffineSection(wat) === wat, 'the affine section is stale').toBe(true);
  });

  it("kernels.wat's f16 small-batch section is wasm/f16tiles.ts's output (rewrite: pnpm exec tsx packages/engine/wasm/f16tiles.ts)", () => {
    const wat = readFileSync(WAT_PATH, 'utf8');
    expect(withF16Section(wat) === wat, 'the f16tile section is stale').toBe(true);
  });
});
