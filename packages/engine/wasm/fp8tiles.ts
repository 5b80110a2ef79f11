/**
 * Writes the FP8 prompt-batch section of kernels.wat (between the `>>> fp8tile` / `<<< fp8tile` markers):
 * row-major fp8_e4m3 matrices (DeepSeek V3 / Kimi K2 / Qwen3 FP8) against 2+ tokens. `$dot1_fp8` decodes
 * every code for every token (~9 vector ops per 4 weights against 2 for the multiply-add), so a prompt
 * paid the decode once per token. Here each pair of rows is decoded once per thread into f32 scratch
 * (`$fp8widen2`, the same bits `$dot1_fp8` builds), then tiles of 2 rows × 1-4 tokens run over it:
 * per 4 columns 2 weight loads, one activation load per token, 2 multiply-adds per token.
 *
 * Every (row, token) keeps `$dot1_fp8`'s arithmetic exactly: per 128-column block one f32x4 accumulator
 * that takes the 4-column products in column order, then its lanes summed as $hsum does, then the block's
 * short tail (cols % 16 of the last block) one product at a time, then `total += s·scale` block by block
 * from +0 (held in the output, stored as 0 first). So a batch gives every token its 1-token bits, in
 * both builds (no relaxed form: plain f32 multiplies and adds).
 * `pnpm exec tsx packages/engine/wasm/fp8tiles.ts` rewrites the section (`--check` compares), then
 * `pnpm --filter @orchard/engine build:wasm`.
 */
import { fileURLToPath } from 'node:url';
import { type Section, runGenerator, withGenerated } from './sections.js';

const K7F = '(v128.const i32x4 0x7f 0x7f 0x7f 0x7f)';
const K80 = '(v128.const i32x4 0x80 0x80 0x80 0x80)';

/** 4 codes (i32 lanes of local $e) as $dot1_fp8 widens them, into local $f. */
function decode4(ind: string): string[] {
  return [
    `${ind}(local.set $m (v128.and (local.get $e) (local.get $k7f)))`,
    `${ind}(local.set $f (v128.bitselect (local.get $nan)`,
    `${ind}  (f32x4.mul (v128.or (i32x4.shl (v128.and (local.get $e) (local.get $k80)) (i32.const 24)) (i32x4.shl (local.get $m) (i32.const 20))) (local.get $p120))`,
    `${ind}  (i32x4.eq (local.get $m) (local.get $k7f))))`,
  ];
}

/** Two rows (w, w + rb) decoded to f32: row 0 at d, row 1 at d + ds. */
function widen2(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`  (func $fp8widen2 (param $w i32) (param $rb i32) (param $cols i32) (param $d i32) (param $ds i32)`);
  e(`    (local $r i32) (local $q i32) (local $o i32) (local $c i32) (local $vend i32)`);
  e(`    (local $v v128) (local $lo v128) (local $hi v128) (local $e v128) (local $m v128) (local $f v128)`);
  e(`    (local $k7f v128) (local $k80 v128) (local $nan v128) (local $p120 v128)`);
  e(`    (local.set $k7f ${K7F})`);
  e(`    (local.set $k80 ${K80})`);
  e(`    (local.set $nan (v128.const i32x4 0x7fc00000 0x7fc00000 0x7fc00000 0x7fc00000))`);
  e(`    (local.set $p120 (v128.const i32x4 0x7b800000 0x7b800000 0x7b800000 0x7b800000))`);
  e(`    (local.set $vend (i32.and (local.get $cols) (i32.const -16)))`);
  e(`    (block $rdone`);
  e(`      (loop $rl`);
  e(`        (br_if $rdone (i32.ge_u (local.get $r) (i32.const 2)))`);
  e(`        (local.set $q (i32.add (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb)))`);
  e(`          (i32.shl (i32.shr_u (i32.add (local.get $cols) (i32.const 127)) (i32.const 7)) (i32.const 2))))`);
  e(`        (local.set $o (i32.add (local.get $d) (i32.mul (local.get $r) (local.get $ds))))`);
  e(`        (local.set $c (i32.const 0))`);
  e(`        (block $vdone`);
  e(`          (loop $vl`);
  e(`            (br_if $vdone (i32.ge_u (local.get $c) (local.get $vend)))`);
  e(`            (local.set $v (v128.load (i32.add (local.get $q) (local.get $c))))`);
  e(`            (local.set $lo (i16x8.extend_low_i8x16_u (local.get $v)))`);
  e(`            (local.set $hi (i16x8.extend_high_i8x16_u (local.get $v)))`);
  const parts = [['lo', 'low'], ['lo', 'high'], ['hi', 'low'], ['hi', 'high']] as const;
  parts.forEach(([src, side], k) => {
    e(`            (local.set $e (i32x4.extend_${side}_i16x8_u (local.get $${src})))`);
    L.push(...decode4('            '));
    e(`            (v128.store offset=${16 * k} (i32.add (local.get $o) (i32.shl (local.get $c) (i32.const 2))) (local.get $f))`);
  });
  e(`            (local.set $c (i32.add (local.get $c) (i32.const 16)))`);
  e(`            (br $vl)))`);
  e(`        (block $tdone`);
  e(`          (loop $tl`);
  e(`            (br_if $tdone (i32.ge_u (local.get $c) (local.get $cols)))`);
  e(`            (f32.store (i32.add (local.get $o) (i32.shl (local.get $c) (i32.const 2)))`);
  e(`              (call $fp8code (i32.load8_u (i32.add (local.get $q) (local.get $c)))))`);
  e(`            (local.set $c (i32.add (local.get $c) (i32.const 1)))`);
  e(`            (br $tl)))`);
  e(`        (local.set $r (i32.add (local.get $r) (i32.const 1)))`);
  e(`        (br $rl))))`);
  e(``);
  return L;
}

/** s plus the products of columns [c, end) of widened row wd and activations xd, one at a time (a block's short tail). */
function tail(): string[] {
  return [
    `  (func $fp8tail (param $s f32) (param $wd i32) (param $xd i32) (param $c i32) (param $end i32) (result f32)`,
    `    (block $done`,
    `      (loop $l`,
    `        (br_if $done (i32.ge_u (local.get $c) (local.get $end)))`,
    `        (local.set $s (f32.add (local.get $s) (f32.mul (f32.load (i32.add (local.get $wd) (i32.shl (local.get $c) (i32.const 2))))`,
    `          (f32.load (i32.add (local.get $xd) (i32.shl (local.get $c) (i32.const 2)))))))`,
    `        (local.set $c (i32.add (local.get $c) (i32.const 1)))`,
    `        (br $l)))`,
    `    (local.get $s))`,
    ``,
  ];
}

/**
 * 2 widened rows (d, d + ds; block scales at w and w + rb) × t tokens (x + j·xs) into out + j·os + 4·r.
 * The vector loop takes 4 columns per step (16-column steps made V8 hoist and spill the loads, as in the
 * q8_0 tiles, wasm/README.md).
 */
function tile(t: number): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const rs = [0, 1];
  const ts = [...Array(t).keys()];
  const pairs = rs.flatMap((r) => ts.map((j) => [r, j] as const));
  e(`  (func $fp8tile2x${t} (param $d i32) (param $ds i32) (param $w i32) (param $rb i32) (param $x i32) (param $xs i32) (param $cols i32) (param $out i32) (param $os i32)`);
  e(`    (local $nb i32) (local $b i32) (local $c i32) (local $end i32) (local $vend i32) (local $c4 i32) (local $vend4 i32) (local $o i32)`);
  e(`    (local $d1 i32)${ts.map((j) => ` (local $x${j} i32)`).join('')}`);
  e(`    (local $w0 v128) (local $w1 v128) (local $xv v128)${pairs.map(([r, j]) => ` (local $a${r}${j} v128)`).join('')}`);
  e(`    (local.set $nb (i32.shr_u (i32.add (local.get $cols) (i32.const 127)) (i32.const 7)))`);
  e(`    (local.set $d1 (i32.add (local.get $d) (local.get $ds)))`);
  for (const j of ts) e(`    (local.set $x${j} ${j === 0 ? '(local.get $x)' : `(i32.add (local.get $x${j - 1}) (local.get $xs))`})`);
  for (const [r, j] of pairs) {
    e(`    (f32.store (i32.add (i32.add (local.get $out) (i32.mul (i32.const ${j}) (local.get $os))) (i32.const ${4 * r})) (f32.const 0))`);
  }
  e(`    (block $bdone`);
  e(`      (loop $bl`);
  e(`        (br_if $bdone (i32.ge_u (local.get $b) (local.get $nb)))`);
  e(`        (local.set $c (i32.shl (local.get $b) (i32.const 7)))`);
  e(`        (local.set $end (i32.add (local.get $c) (i32.const 128)))`);
  e(`        (if (i32.gt_u (local.get $end) (local.get $cols)) (then (local.set $end (local.get $cols))))`);
  e(`        (local.set $vend (i32.add (local.get $c) (i32.and (i32.sub (local.get $end) (local.get $c)) (i32.const -16))))`);
  e(`        (local.set $c4 (i32.shl (local.get $c) (i32.const 2)))`);
  e(`        (local.set $vend4 (i32.shl (local.get $vend) (i32.const 2)))`);
  for (const [r, j] of pairs) e(`        (local.set $a${r}${j} (v128.const i32x4 0 0 0 0))`);
  e(`        (block $vdone`);
  e(`          (loop $vl`);
  e(`            (br_if $vdone (i32.ge_u (local.get $c4) (local.get $vend4)))`);
  e(`            (local.set $w0 (v128.load (i32.add (local.get $d) (local.get $c4))))`);
  e(`            (local.set $w1 (v128.load (i32.add (local.get $d1) (local.get $c4))))`);
  for (const j of ts) {
    e(`            (local.set $xv (v128.load (i32.add (local.get $x${j}) (local.get $c4))))`);
    for (const r of rs) e(`            (local.set $a${r}${j} (f32x4.add (local.get $a${r}${j}) (f32x4.mul (local.get $w${r}) (local.get $xv))))`);
  }
  e(`            (local.set $c4 (i32.add (local.get $c4) (i32.const 16)))`);
  e(`            (br $vl)))`);
  for (const [r, j] of pairs) {
    e(`        (local.set $o (i32.add (i32.add (local.get $out) (i32.mul (i32.const ${j}) (local.get $os))) (i32.const ${4 * r})))`);
    e(`        (f32.store (local.get $o) (f32.add (f32.load (local.get $o)) (f32.mul`);
    e(`          (call $fp8tail (f32x4.lanesum (local.get $a${r}${j})) ${r === 0 ? '(local.get $d)' : '(local.get $d1)'} (local.get $x${j}) (local.get $vend) (local.get $end))`);
    e(`          (f32.load (i32.add ${r === 0 ? '(local.get $w)' : '(i32.add (local.get $w) (local.get $rb))'} (i32.shl (local.get $b) (i32.const 2)))))))`);
  }
  e(`        (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
  e(`        (br $bl))))`);
  e(``);
  return L;
}

/** FP8 prompt batches of rows [r0, r1): pairs of rows widened once, then tiles of 4 tokens and one of the rest; returns the first row left. */
function rowsFp8(): string[] {
  const args = (t: string) =>
    `(local.get $scr) (local.get $ds) (local.get $wr) (local.get $rb) (i32.add (local.get $x) (i32.mul (local.get $t) (local.get $xs))) (local.get $xs) (local.get $cols) ` +
    `(i32.add (local.get $out) (i32.add (i32.mul (local.get $t) (i32.shl (local.get $rows) (i32.const 2))) (i32.shl (local.get $r) (i32.const 2)))) (i32.shl (local.get $rows) (i32.const 2))${t}`;
  return [
    `  ;; FP8 prompt batches (kernel 55, 2+ tokens) of rows [r0, r1); the widened pair of rows in this thread's scratch (row 1 at ds).`,
    `  (func $rows_fp8 (param $out i32) (param $w i32) (param $x i32) (param $rows i32) (param $cols i32) (param $n i32) (param $rb i32)`,
    `                  (param $xs i32) (param $r0 i32) (param $r1 i32) (param $tid i32) (result i32)`,
    `    (local $r i32) (local $wr i32) (local $scr i32) (local $ds i32) (local $t i32)`,
    `    (local.set $scr (i32.add (i32.load offset=192 (i32.const 0)) (i32.mul (local.get $tid) (i32.load offset=196 (i32.const 0)))))`,
    `    (local.set $ds (i32.and (i32.add (i32.shl (local.get $cols) (i32.const 2)) (i32.const 15)) (i32.const -16)))`,
    `    (local.set $r (local.get $r0))`,
    `    (block $done`,
    `      (loop $l`,
    `        (br_if $done (i32.gt_u (i32.add (local.get $r) (i32.const 2)) (local.get $r1)))`,
    `        (local.set $wr (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))))`,
    `        (call $fp8widen2 (local.get $wr) (local.get $rb) (local.get $cols) (local.get $scr) (local.get $ds))`,
    `        (local.set $t (i32.const 0))`,
    `        (block $tdone`,
    `          (loop $tl`,
    `            (br_if $tdone (i32.gt_u (i32.add (local.get $t) (i32.const 4)) (local.get $n)))`,
    `            (call $fp8tile2x4 ${args('')})`,
    `            (local.set $t (i32.add (local.get $t) (i32.const 4)))`,
    `            (br $tl)))`,
    `        (if (i32.eq (i32.sub (local.get $n) (local.get $t)) (i32.const 3)) (then (call $fp8tile2x3 ${args('')})))`,
    `        (if (i32.eq (i32.sub (local.get $n) (local.get $t)) (i32.const 2)) (then (call $fp8tile2x2 ${args('')})))`,
    `        (if (i32.eq (i32.sub (local.get $n) (local.get $t)) (i32.const 1)) (then (call $fp8tile2x1 ${args('')})))`,
    `        (local.set $r (i32.add (local.get $r) (i32.const 2)))`,
    `        (br $l)))`,
    `    (local.get $r))`,
    ``,
  ];
}

export function fp8tileSection(): string {
  return [
    '  ;; ---------------------------------------------------------------- FP8 prompt batches (see wasm/fp8tiles.ts)',
    ...widen2(),
    ...tail(),
    ...[4, 3, 2, 1].flatMap(tile),
    ...rowsFp8(),
  ].join('\n');
}

export const FP8TILE_SECTION: Section = { name: 'fp8tile', script: 'fp8tiles.ts', text: fp8tileSection };

export const withFp8tileSection = (wat: string) => withGenerated(wat, FP8TILE_SECTION);

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) runGenerator(FP8TILE_SECTION, process.argv);
