import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { WASM_PATHS, WAT_PATH, buildKernels } from '../../wasm/build.js';
import { withAffineSection } from '../../wasm/affine.js';
import { withF16Section } from '../../wasm/f16tiles.js';
import { withKquantSection } from '../../wasm/kquants.js';
import { withMxtileSection } from '../../wasm/mxfp4tiles.js';
import { withFp8tileSection } from '../../wasm/fp8tiles.js';
import { withSection } from '../../wasm/qtiles.js';
import { SIMD_VARIANTS, selectVariant } from '../../wasm/variants.js';
import { WA } from '../../src/kernels/wasm/module.js';

describe('kernels.wasm', () => {
  it.each(SIMD_VARIANTS)('the %s binary is the build of the committed kernels.wat (rebuild: pnpm --filter @orchard/engine build:wasm)', async (variant) => {
    const built = Buffer.from(await buildKernels(variant));
    const committed = readFileSync(WASM_PATHS[variant]);
    expect(built.equals(committed), `${WASM_PATHS[variant]} is stale`).toBe(true);
  });

  it('only the relaxed build uses relaxed SIMD, and it does', () => {
    const wat = readFileSync(WAT_PATH, 'utf8');
    expect(selectVariant(wat, 'baseline', WAT_PATH)).not.toMatch(/relaxed_/);
    expect(selectVariant(wat, 'relaxed', WAT_PATH)).toMatch(/i16x8\.relaxed_dot_i8x16_i7x16_s/);
  });

  it('refuses unbalanced relaxed/baseline markers, naming the line', () => {
    expect(() => selectVariant('a\n;; @if relaxed\nb\n', 'relaxed', 'k.wat')).toThrow(/k\.wat:2: ';; @if relaxed' is never closed/);
    expect(() => selectVariant(';; @else\n', 'baseline', 'k.wat')).toThrow(/k\.wat:1: ';; @else' without/);
    expect(() => selectVariant(';; @if relaxed\n;; @if relaxed\n', 'baseline', 'k.wat')).toThrow(/k\.wat:2: .*no nesting/);
    const src = 'a\n  ;; @if relaxed\nr\n  ;; @else\nb\n  ;; @end\nz';
    expect(selectVariant(src, 'relaxed', 'k.wat')).toBe('a\nr\nz');
    expect(selectVariant(src, 'baseline', 'k.wat')).toBe('a\nb\nz');
  });

  it('expands f32x4.muladd2 per build, nested operands included, and names a malformed one', () => {
    const src = '(local.set $a (f32x4.muladd2 (local.get $a) (local.get $e) (v128.load (local.get $p)) (local.get $d) (local.get $x)))';
    expect(selectVariant(src, 'baseline', 'k.wat')).toBe(
      '(local.set $a (f32x4.add (local.get $a) (f32x4.add (f32x4.mul (local.get $e) (v128.load (local.get $p))) (f32x4.mul (local.get $d) (local.get $x)))))',
    );
    expect(selectVariant(src, 'relaxed', 'k.wat')).toBe(
      '(local.set $a (f32x4.add (local.get $a) (f32x4.relaxed_madd (local.get $e) (v128.load (local.get $p)) (f32x4.mul (local.get $d) (local.get $x)))))',
    );
    expect(() => selectVariant('x\n(f32x4.muladd2 (local.get $a) (local.get $b))', 'relaxed', 'k.wat')).toThrow(/k\.wat:2: f32x4\.muladd2 takes 5 operands/);
  });

  it('f32x4.lanemax is the largest of four |x| lanes, bit for bit, and a NaN lane wins', async () => {
    const wat = `(module (func (export "m") (param $a f32) (param $b f32) (param $c f32) (param $d f32) (result f32) (local $v v128)
      (local.set $v (f32x4.abs (f32x4.replace_lane 3 (f32x4.replace_lane 2 (f32x4.replace_lane 1 (f32x4.splat (local.get $a)) (local.get $b)) (local.get $c)) (local.get $d))))
      (f32x4.lanemax (local.get $v))))`;
    const wabt = await (await import('wabt')).default();
    const mod = wabt.parseWat('m.wat', selectVariant(wat, 'baseline', 'm.wat'), { simd: true });
    const { buffer } = mod.toBinary({});
    mod.destroy();
    const { m } = new WA.Instance(new WA.Module(buffer), {}).exports as { m: (...x: number[]) => number };
    const f32 = (v: number) => Math.fround(v);
    for (const lanes of [[1, -3, 2, 0.5], [-0, 0, -0, 0], [1e-45, -2e-45, 0, 0], [f32(3.4e38), -Infinity, 1, 2], [-7, -7.000001, 6, 5]]) {
      expect(Object.is(m(...lanes), f32(Math.max(...lanes.map(Math.abs)))), `${lanes}`).toBe(true);
    }
    expect(m(1, NaN, 2, Infinity)).toBeNaN();
    expect(m(NaN, NaN, NaN, NaN)).toBeNaN();
  });

  it('writes f32x4.exp out as statements on its named locals, the same in both builds, and names a malformed one', () => {
    const src = '  (loop\n    (f32x4.exp $y $x $t $k $r)\n    (br 0))';
    const out = selectVariant(src, 'relaxed', 'k.wat');
    expect(out).toBe(selectVariant(src, 'baseline', 'k.wat'));
    const lines = out.split('\n').slice(1, -1);
    expect(lines.every((l) => l.startsWith('    (local.set $'))).toBe(true);
    expect(lines[0]).toMatch(/^ {4}\(local\.set \$x \(f32x4\.pmin \(f32x4\.pmax \(local\.get \$x\)/);
    expect(lines.at(-1)).toMatch(/^ {4}\(local\.set \$y \(f32x4\.mul \(local\.get \$y\) \(i32x4\.shl \(i32x4\.add \(local\.get \$t\)/);
    expect(() => selectVariant('x\n  (f32x4.exp $y $x)', 'relaxed', 'k.wat')).toThrow(/k\.wat:2: f32x4\.exp takes 5 local names/);
    expect(() => selectVariant('(local.set $y (f32x4.exp $y $x $t $k $r))', 'relaxed', 'k.wat')).toThrow(/k\.wat:1: f32x4\.exp stands alone on its line/);
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

  it("kernels.wat's MXFP4 prompt-batch section is wasm/mxfp4tiles.ts's output (rewrite: pnpm exec tsx packages/engine/wasm/mxfp4tiles.ts)", () => {
    const wat = readFileSync(WAT_PATH, 'utf8');
    expect(withMxtileSection(wat) === wat, 'the mxtile section is stale').toBe(true);
  });

  it("kernels.wat's FP8 prompt-batch section is wasm/fp8tiles.ts's output (rewrite: pnpm exec tsx packages/engine/wasm/fp8tiles.ts)", () => {
    const wat = readFileSync(WAT_PATH, 'utf8');
    expect(withFp8tileSection(wat) === wat, 'the fp8tile section is stale').toBe(true);
  });

  it("kernels.wat's f16 small-batch section is wasm/f16tiles.ts's output (rewrite: pnpm exec tsx packages/engine/wasm/f16tiles.ts)", () => {
    const wat = readFileSync(WAT_PATH, 'utf8');
    expect(withF16Section(wat) === wat, 'the f16tile section is stale').toBe(true);
  });
});
