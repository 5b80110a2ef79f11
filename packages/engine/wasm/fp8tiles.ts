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
import { tiledRowsDriver, transposeStore4 } from './qtiles.js';
import { type Section, runGenerator, withGenerated } from './sections.js';

/**
 * Locals and constants the 16-code decode uses (kept in locals: V8 rebuilds a v128.const at every use).
 * E4M3 code c as f32: sign to bit 31 and the 7 exponent/mantissa bits to bits 26..20 give value·2^-120
 * (E4M3's bias 7 against f32's 127; its subnormals become f32 subnormals), times 2^120. Built per 8
 * codes in i16 lanes: c into the high byte (interleaved with zero bytes: V8's punpck{l,h}bw), an arithmetic shift by 4
 * (sign to bits 15..11, the 7 bits to 10..4), bits 14..11 cleared; then each i16 interleaved with a
 * zero i16 into the high half of an f32. ~14 ops per 16 codes where the i32 form took ~36. 0x7f/0xff
 * codes are NaN: checked once per 16 codes (3 ops), the rare vector that has one patched after.
 */
const DECODE_LOCALS =
  '(local $v v128) (local $h0 v128) (local $h1 v128) (local $t0 v128) (local $t1 v128) (local $t2 v128) (local $t3 v128) ' +
  '(local $f0 v128) (local $f1 v128) (local $f2 v128) (local $f3 v128) (local $zero v128) (local $k7f v128) (local $kbits v128) (local $knan v128) (local $nan v128) (local $p120 v128)';

function decodeInit(ind: string): string[] {
  return [
    `${ind}(local.set $k7f (v128.const i8x16 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f))`,
    `${ind}(local.set $kbits (v128.const i16x8 0x87f0 0x87f0 0x87f0 0x87f0 0x87f0 0x87f0 0x87f0 0x87f0))`,
    `${ind}(local.set $knan (v128.const i32x4 0x07f00000 0x07f00000 0x07f00000 0x07f00000))`,
    `${ind}(local.set $nan (v128.const i32x4 0x7fc00000 0x7fc00000 0x7fc00000 0x7fc00000))`,
    `${ind}(local.set $p120 (v128.const i32x4 0x7b800000 0x7b800000 0x7b800000 0x7b800000))`,
  ];
}

/** The 16 codes at address `at` as the bits of value·2^-120 into $t0..$t3 (codes 4k..4k+3 in $tk); NaN codes not patched. */
function decodeBits16(ind: string, at: string): string[] {
  const L = [
    `${ind}(local.set $v (v128.load ${at}))`,
    `${ind}(local.set $h0 (v128.and (i16x8.shr_s (i8x16.shuffle 16 0 17 1 18 2 19 3 20 4 21 5 22 6 23 7 (local.get $v) (local.get $zero)) (i32.const 4)) (local.get $kbits)))`,
    `${ind}(local.set $h1 (v128.and (i16x8.shr_s (i8x16.shuffle 24 8 25 9 26 10 27 11 28 12 29 13 30 14 31 15 (local.get $v) (local.get $zero)) (i32.const 4)) (local.get $kbits)))`,
  ];
  const halves = [['h0', 0], ['h0', 8], ['h1', 0], ['h1', 8]] as const;
  halves.forEach(([h, o], k) => {
    // the interleave patterns V8 emits as one punpck{l,h}wd (the zero words' indices in order too)
    const ix = [0, 1, 2, 3].map((i) => `${16 + 2 * i + o} ${17 + 2 * i + o} ${2 * i + o} ${2 * i + 1 + o}`).join(' ');
    L.push(`${ind}(local.set $t${k} (i8x16.shuffle ${ix} (local.get $${h}) (local.get $zero)))`);
  });
  return L;
}

/** The 16 codes at address `at` into $f0..$f3 (codes 4k..4k+3 in $fk), as f32. */
function decode16(ind: string, at: string): string[] {
  const L = decodeBits16(ind, at);
  for (const k of [0, 1, 2, 3]) L.push(`${ind}(local.set $f${k} (f32x4.mul (local.get $t${k}) (local.get $p120)))`);
  L.push(`${ind}(if (v128.any_true (i8x16.eq (v128.and (local.get $v) (local.get $k7f)) (local.get $k7f)))`);
  L.push(`${ind}  (then`);
  for (const k of [0, 1, 2, 3]) {
    L.push(`${ind}    (local.set $f${k} (v128.bitselect (local.get $nan) (local.get $f${k}) (i32x4.eq (v128.and (local.get $t${k}) (local.get $knan)) (local.get $knan))))`);
  }
  L.push(`${ind}))`);
  return L;
}

/**
 * One row against one token (decode): per 128-column block one f32x4 accumulator over the 4-column
 * products in column order, its lanes summed as $hsum does, the block's short tail (cols % 16 of the
 * last block) one product at a time, then `total += s·scale` from +0. The 4-row kernel ($dot4_fp8) is
 * this one four times; the prompt tiles below keep this arithmetic per row and token.
 */
function dot1(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`  (func $dot1_fp8 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)`);
  e(`    (local $nb i32) (local $q i32) (local $b i32) (local $c i32) (local $end i32) (local $vend i32) (local $xc i32)`);
  e(`    (local $acc v128) (local $s f32) (local $total f32)`);
  e(`    ${DECODE_LOCALS}`);
  L.push(...decodeInit('    '));
  e(`    (local.set $nb (i32.shr_u (i32.add (local.get $cols) (i32.const 127)) (i32.const 7)))`);
  e(`    (local.set $q (i32.add (local.get $w) (i32.shl (local.get $nb) (i32.const 2))))`);
  e(`    (block $bdone`);
  e(`      (loop $bl`);
  e(`        (br_if $bdone (i32.ge_u (local.get $b) (local.get $nb)))`);
  e(`        (local.set $c (i32.shl (local.get $b) (i32.const 7)))`);
  e(`        (local.set $end (i32.add (local.get $c) (i32.const 128)))`);
  e(`        (if (i32.gt_u (local.get $end) (local.get $cols)) (then (local.set $end (local.get $cols))))`);
  e(`        (local.set $vend (i32.add (local.get $c) (i32.and (i32.sub (local.get $end) (local.get $c)) (i32.const -16))))`);
  e(`        (local.set $acc (v128.const i32x4 0 0 0 0))`);
  e(`        (block $vdone`);
  e(`          (loop $vl`);
  e(`            (br_if $vdone (i32.ge_u (local.get $c) (local.get $vend)))`);
  L.push(...decode16('            ', '(i32.add (local.get $q) (local.get $c))'));
  e(`            (local.set $xc (i32.add (local.get $x) (i32.shl (local.get $c) (i32.const 2))))`);
  for (const k of [0, 1, 2, 3]) e(`            (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (local.get $f${k}) (v128.load offset=${16 * k} (local.get $xc)))))`);
  e(`            (local.set $c (i32.add (local.get $c) (i32.const 16)))`);
  e(`            (br $vl)))`);
  e(`        (local.set $s (f32x4.lanesum (local.get $acc)))`);
  e(`        (block $tdone`);
  e(`          (loop $tl`);
  e(`            (br_if $tdone (i32.ge_u (local.get $c) (local.get $end)))`);
  e(`            (local.set $s (f32.add (local.get $s)`);
  e(`              (f32.mul (call $fp8code (i32.load8_u (i32.add (local.get $q) (local.get $c))))`);
  e(`                       (f32.load (i32.add (local.get $x) (i32.shl (local.get $c) (i32.const 2)))))))`);
  e(`            (local.set $c (i32.add (local.get $c) (i32.const 1)))`);
  e(`            (br $tl)))`);
  e(`        (local.set $total (f32.add (local.get $total)`);
  e(`          (f32.mul (local.get $s) (f32.load (i32.add (local.get $w) (i32.shl (local.get $b) (i32.const 2)))))))`);
  e(`        (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
  e(`        (br $bl)))`);
  e(`    (f32.store (local.get $out) (local.get $total)))`);
  e(``);
  return L;
}

/** Two rows (w, w + rb) decoded to f32: row 0 at d, row 1 at d + ds. */
function widen2(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`  (func $fp8widen2 (param $w i32) (param $rb i32) (param $cols i32) (param $d i32) (param $ds i32)`);
  e(`    (local $r i32) (local $q i32) (local $o i32) (local $c i32) (local $vend i32)`);
  e(`    ${DECODE_LOCALS}`);
  L.push(...decodeInit('    '));
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
  L.push(...decode16('            ', '(i32.add (local.get $q) (local.get $c))'));
  for (const k of [0, 1, 2, 3]) e(`            (v128.store offset=${16 * k} (i32.add (local.get $o) (i32.shl (local.get $c) (i32.const 2))) (local.get $f${k}))`);
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

/**
 * One 4-row group (rows w, w + rb, ...) widened into q8_0's tile form (qtiles.ts) for $qtile{ws/4}x*, so
 * the integer tiles run FP8 prompt batches: per 32-column block and row, each code as the i16 integer
 * round(v·2^(9−s)) (v its E4M3 value, ties to even) and the row's f32 factor scale·2^(s−9). E4M3 values
 * are whole multiples of 2^−9 below 2^(E−6) for a block whose largest exponent field is E, so s =
 * max(0, E − 9) keeps every integer within ±3840 and leaves them exact unless the block holds a value
 * of 8 or more; then values below 2^(s−9) lose their last bits (an error of at most 2^(s−10), under
 * 2^−12 of the block's largest |v|). The activations come at ±16383 per 32 columns (quant_q8 mode 2),
 * so a block's 32 products stay within i32 (32·3840·16383 < 2^31) and the product is close to f32's:
 * 8-bit activations (q8_0's) flipped a random model's greedy tokens. A block with a NaN code (0x7f/0xff:
 * the largest 7-bit magnitude) gets a NaN factor, so its row is NaN for every token, as in the 1-token
 * kernel. Vector k of a block at d + ws·k, the 4 factors at d + 16·ws; blocks 17·ws apart.
 */
function qwiden(ws: number): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const rs = [0, 1, 2, 3];
  const splat = (k: string, v: string) => `(local.set $${k} (v128.const i32x4 ${v} ${v} ${v} ${v}))`;
  e(`  (func $fp8qwiden${ws} (param $w i32) (param $rb i32) (param $cols i32) (param $d i32)`);
  e(`    (local $b i32) (local $nb i32) (local $c i32) (local $sb i32) (local $o i32)${rs.map((r) => ` (local $p${r} i32) (local $q${r} i32)`).join('')}`);
  e(`    ${DECODE_LOCALS}`);
  e(`    (local $r0 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128) (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128)`);
  e(`    (local $m0 v128) (local $m1 v128) (local $m2 v128) (local $m3 v128) (local $u v128) (local $y v128) (local $mx v128) (local $sh v128) (local $round v128) (local $k v128)`);
  e(`    (local $c9 v128) (local $c21 v128) (local $c118 v128) (local $c127 v128) (local $half v128) (local $cff v128)`);
  L.push(...decodeInit('    '));
  e(`    ${splat('c9', '9')}`);
  e(`    ${splat('c21', '21')}`);
  e(`    ${splat('c118', '118')}`);
  e(`    ${splat('c127', '127')}`);
  e(`    ${splat('half', '0x00400000')}`);
  e(`    ${splat('cff', '0xff')}`);
  e(`    (local.set $nb (i32.shr_u (local.get $cols) (i32.const 5)))`);
  e(`    (local.set $p0 (local.get $w))`);
  for (const r of rs.slice(1)) e(`    (local.set $p${r} (i32.add (local.get $p${r - 1}) (local.get $rb)))`);
  for (const r of rs) e(`    (local.set $q${r} (i32.add (local.get $p${r}) (i32.shl (i32.shr_u (i32.add (local.get $cols) (i32.const 127)) (i32.const 7)) (i32.const 2))))`);
  e(`    (local.set $o (local.get $d))`);
  e(`    (block $done`);
  e(`      (loop $l`);
  e(`        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))`);
  e(`        (local.set $c (i32.shl (local.get $b) (i32.const 5)))`);
  e(`        ;; each row's largest 7-bit magnitude code over the block, into i32 lane r of $mx`);
  for (const r of rs) {
    e(`        (local.set $m${r} (i8x16.max_u (v128.and (v128.load (i32.add (local.get $q${r}) (local.get $c))) (local.get $k7f))`);
    e(`          (v128.and (v128.load offset=16 (i32.add (local.get $q${r}) (local.get $c))) (local.get $k7f))))`);
  }
  const lo8 = '0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23';
  const hi8 = '8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31';
  e(`        (local.set $u (i8x16.max_u (i8x16.shuffle ${lo8} (local.get $m0) (local.get $m1)) (i8x16.shuffle ${hi8} (local.get $m0) (local.get $m1))))`);
  e(`        (local.set $y (i8x16.max_u (i8x16.shuffle ${lo8} (local.get $m2) (local.get $m3)) (i8x16.shuffle ${hi8} (local.get $m2) (local.get $m3))))`);
  e(`        (local.set $u (i8x16.max_u (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $u) (local.get $y))`);
  e(`          (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $u) (local.get $y))))`);
  e(`        (local.set $u (i8x16.max_u (local.get $u) (i8x16.shuffle 2 3 0 1 6 7 4 5 10 11 8 9 14 15 12 13 (local.get $u) (local.get $u))))`);
  e(`        (local.set $u (i8x16.max_u (local.get $u) (i8x16.shuffle 1 0 3 2 5 4 7 6 9 8 11 10 13 12 15 14 (local.get $u) (local.get $u))))`);
  e(`        (local.set $mx (v128.and (local.get $u) (local.get $cff)))`);
  e(`        ;; s = max(0, E − 9) per row; its rounding constant 1.5·2^(s−106) (whose ulp is 2^(s−129): adding it to a`);
  e(`        ;; code's value·2^−120 leaves round(value·2^(9−s)) in the low mantissa bits, ties to even, subnormal codes`);
  e(`        ;; included) and the row's factor scale·2^(s−9) (NaN for a NaN code)`);
  e(`        (local.set $sh (i32x4.max_s (i32x4.sub (i32x4.shr_u (local.get $mx) (i32.const 3)) (local.get $c9)) (local.get $zero)))`);
  e(`        (local.set $round (v128.or (i32x4.shl (i32x4.add (local.get $sh) (local.get $c21)) (i32.const 23)) (local.get $half)))`);
  e(`        (local.set $sb (i32.shl (i32.shr_u (local.get $b) (i32.const 2)) (i32.const 2)))`);
  e(`        (v128.store offset=${16 * ws} (local.get $o) (v128.bitselect (local.get $nan)`);
  e(`          (f32x4.mul (f32x4.replace_lane 3 (f32x4.replace_lane 2 (f32x4.replace_lane 1 (f32x4.splat (f32.load (i32.add (local.get $p0) (local.get $sb))))`);
  e(`            (f32.load (i32.add (local.get $p1) (local.get $sb)))) (f32.load (i32.add (local.get $p2) (local.get $sb)))) (f32.load (i32.add (local.get $p3) (local.get $sb))))`);
  e(`            (i32x4.shl (i32x4.add (local.get $sh) (local.get $c118)) (i32.const 23)))`);
  e(`          (i32x4.eq (local.get $mx) (local.get $c127))))`);
  for (const h of [0, 1]) {
    e(`        ;; columns ${16 * h}..${16 * h + 15}: row r's first 8 into $r<r>, the next 8 into $s<r>`);
    for (const r of rs) {
      L.push(...decodeBits16('        ', `offset=${16 * h} (i32.add (local.get $q${r}) (local.get $c))`));
      e(`        (local.set $k (i8x16.shuffle ${Array(4).fill(`${4 * r} ${4 * r + 1} ${4 * r + 2} ${4 * r + 3}`).join(' ')} (local.get $round) (local.get $round)))`);
      const int = (j: number) => `(i32x4.sub (f32x4.add (local.get $t${j}) (local.get $k)) (local.get $k))`;
      e(`        (local.set $r${r} (i16x8.narrow_i32x4_s ${int(0)} ${int(1)}))`);
      e(`        (local.set $s${r} (i16x8.narrow_i32x4_s ${int(2)} ${int(3)}))`);
    }
    L.push(...transposeStore4(ws, 8 * h, '        '));
    L.push(...transposeStore4(ws, 8 * h + 4, '        ', 's'));
  }
  e(`        (local.set $o (i32.add (local.get $o) (i32.const ${17 * ws})))`);
  e(`        (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
  e(`        (br $l))))`);
  e(``);
  return L;
}

/** FP8 prompt batches of rows [r0, r1) at cols % 32 == 0: q8_0's integer tiles over groups from $fp8qwiden; returns the first row left. */
function rowsFp8q(): string[] {
  const nb = '(i32.shr_u (local.get $cols) (i32.const 5))';
  return tiledRowsDriver({
    name: 'rows_fp8q',
    comment: "FP8 prompt batches (kernel 55, 2+ tokens, cols % 32 == 0) of rows [r0, r1); the tile activations' address is at 208.",
    widen: (ws, w, d) => `(call $fp8qwiden${ws} ${w} (local.get $rb) (local.get $cols) ${d})`,
    tiles: (rows) =>
      `(call $qtiles${rows} (local.get $scr) ${nb} (i32.load offset=208 (i32.const 0)) (i32.add (local.get $out) (i32.shl (local.get $r) (i32.const 2))) (i32.shl (local.get $rows) (i32.const 2)) (local.get $n))`,
  });
}

export function fp8tileSection(): string {
  return [
    '  ;; ---------------------------------------------------------------- FP8 prompt batches (see wasm/fp8tiles.ts)',
    ...dot1(),
    ...widen2(),
    ...tail(),
    ...[4, 3, 2, 1].flatMap(tile),
    ...rowsFp8(),
    ...qwiden(16),
    ...qwiden(32),
    ...rowsFp8q(),
  ].join('\n');
}

export const FP8TILE_SECTION: Section = { name: 'fp8tile', script: 'fp8tiles.ts', text: fp8tileSection };

export const withFp8tileSection = (wat: string) => withGenerated(wat, FP8TILE_SECTION);

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) runGenerator(FP8TILE_SECTION, process.argv);
