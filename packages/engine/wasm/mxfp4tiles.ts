/**
 * Writes the MXFP4 prompt-batch section of kernels.wat (between the `>>> mxtile` / `<<< mxtile` markers):
 * row-major MXFP4 matrices (gpt-oss's experts) against 2+ tokens run the q8_0 token tiles ($qtiles8/4,
 * qtiles.ts) over 4-row groups widened once per thread: per 32-column block the 4 rows' values as
 * ggml's doubled integers (0, ±1, ±2, ±3, ±4, ±6, ±8, ±12: the i8x16.swizzle of $dot1_mxfp4) in i16
 * column pairs, then the rows' block scales 2^(e − 128) as f32. Against the q8_0-form activations the
 * tiles sum $dot1_mxfp4's exact block totals and take its f32 step (s += f32(total)·(2^(e − 128)·d_x),
 * block by block), so a batch gives every token the 1-token bits, in both builds.
 * `pnpm exec tsx packages/engine/wasm/mxfp4tiles.ts` rewrites the section (`--check` compares), then
 * `pnpm --filter @orchard/engine build:wasm`.
 */
import { fileURLToPath } from 'node:url';
import { tiledRowsDriver, transposeStore4 } from './qtiles.js';
import { type Section, runGenerator, withGenerated } from './sections.js';

const LUT = '(v128.const i8x16 0 1 2 3 4 6 8 12 0 -1 -2 -3 -4 -6 -8 -12)';
const NIBBLE = '(v128.const i8x16 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15)';

/** Row r's block scale 2^(e − 128) as f32 from its exponent byte, as $dot1_mxfp4 builds it (subnormal for e < 2). */
const scaleOf = (r: number) =>
  `(f32.reinterpret_i32 (select (i32.shl (i32.sub (i32.load8_u (local.get $p${r})) (i32.const 1)) (i32.const 23)) ` +
  `(i32.shl (i32.const 0x00200000) (i32.load8_u (local.get $p${r}))) (i32.ge_u (i32.load8_u (local.get $p${r})) (i32.const 2))))`;

/** One 4-row group widened for $qtile{ws/4}x*: vector k of a block at d + ws·k, the rows' scales at d + 16·ws; blocks 17·ws apart. */
function mxwiden(ws: number): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const rs = [0, 1, 2, 3];
  e(`  (func $mxwiden${ws} (param $w i32) (param $rb i32) (param $nb i32) (param $d i32)`);
  e(`    (local $b i32) (local $o i32)${rs.map((r) => ` (local $p${r} i32) (local $r${r} v128) (local $lo${r} v128) (local $hi${r} v128)`).join('')}`);
  e(`    (local $t0 v128) (local $t1 v128) (local $t2 v128) (local $t3 v128)`);
  e(`    (local.set $p0 (local.get $w))`);
  for (const r of rs.slice(1)) e(`    (local.set $p${r} (i32.add (local.get $p${r - 1}) (local.get $rb)))`);
  e(`    (local.set $o (local.get $d))`);
  e(`    (block $done`);
  e(`      (loop $l`);
  e(`        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))`);
  e(`        ;; elements 0..15 (low nibbles) and 16..31 (high) of each row as doubled integers`);
  for (const r of rs) {
    e(`        (local.set $lo${r} (i8x16.swizzle ${LUT} (v128.and (v128.load offset=1 (local.get $p${r})) ${NIBBLE})))`);
    e(`        (local.set $hi${r} (i8x16.swizzle ${LUT} (i8x16.shr_u (v128.load offset=1 (local.get $p${r})) (i32.const 4))))`);
  }
  const parts = [['lo', 'low'], ['lo', 'high'], ['hi', 'low'], ['hi', 'high']] as const;
  parts.forEach(([src, side], q) => {
    e(`        ;; columns ${8 * q}..${8 * q + 7}`);
    for (const r of rs) e(`        (local.set $r${r} (i16x8.extend_${side}_i8x16_s (local.get $${src}${r})))`);
    L.push(...transposeStore4(ws, 4 * q, '        '));
  });
  e(`        (v128.store offset=${16 * ws} (local.get $o) (f32x4.replace_lane 3 (f32x4.replace_lane 2 (f32x4.replace_lane 1`);
  e(`          (f32x4.splat ${scaleOf(0)}) ${scaleOf(1)}) ${scaleOf(2)}) ${scaleOf(3)}))`);
  for (const r of rs) e(`        (local.set $p${r} (i32.add (local.get $p${r}) (i32.const 17)))`);
  e(`        (local.set $o (i32.add (local.get $o) (i32.const ${17 * ws})))`);
  e(`        (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
  e(`        (br $l))))`);
  e(``);
  return L;
}

/** MXFP4 prompt batches of rows [r0, r1): 8 rows at a time (two groups side by side), then 4; returns the first row left. */
function rowsMx(): string[] {
  const nb = '(i32.shr_u (local.get $cols) (i32.const 5))';
  return tiledRowsDriver({
    name: 'rows_mx',
    comment: "MXFP4 prompt batches (kernel 46, 2+ tokens) of rows [r0, r1); the tile activations' address is at 208.",
    widen: (ws, w, d) => `(call $mxwiden${ws} ${w} (local.get $rb) ${nb} ${d})`,
    tiles: (rows) =>
      `(call $qtiles${rows} (local.get $scr) ${nb} (i32.load offset=208 (i32.const 0)) (i32.add (local.get $out) (i32.shl (local.get $r) (i32.const 2))) (i32.shl (local.get $rows) (i32.const 2)) (local.get $n))`,
  });
}

export function mxtileSection(): string {
  return ['  ;; ---------------------------------------------------------------- MXFP4 prompt batches (see wasm/mxfp4tiles.ts)', ...mxwiden(16), ...mxwiden(32), ...rowsMx()].join('\n');
}

export const MXTILE_SECTION: Section = { name: 'mxtile', script: 'mxfp4tiles.ts', text: mxtileSection };

export const withMxtileSection = (wat: string) => withGenerated(wat, MXTILE_SECTION);

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) runGenerator(MXTILE_SECTION, process.argv);
