/**
 * Writes the FP8 section of kernels.wat (between the `>>> fp8tile` / `<<< fp8tile` markers): row-major
 * fp8_e4m3 matrices (DeepSeek V3 / Kimi K2 / Qwen3 FP8).
 *
 * One token (`$dot1_fp8`, `$dot2_fp8` for two rows, `$dot4_fp8` two of that): each code's bits shifted into an f32 give
 * value·2^−120 exactly (below), and the activations come multiplied by 2^64 and each 16-column group in
 * the decode's lane order (the backend's `fp8_prep_x`),
 * so the products are value·x·2^−56 with no per-code multiply; per 128-column block two f32x4
 * accumulators take the 16-column steps' products in pairs ((f32x4.muladd2 acc a b c d), so the
 * relaxed build fuses one multiply per pair), then their sum's lanes, then the block's short tail one
 * product at a time; the block sum times 2^56 (exact) times the block's factor adds to the row's total.
 * Powers of two scale exactly, so this is the f32 product of the values unless an activation is beyond
 * 2^64 or a product below 2^−70. Two accumulators, not one: a chain of four dependent adds per step held
 * the kernel at ~1.3 weights per cycle. A block holding a NaN code has a NaN factor (quant/fp8.ts marks
 * it at load), so its row is NaN without a check per code.
 *
 * Prompt batches (2+ tokens) at cols % 32 == 0 (every real checkpoint): q8_0's integer tiles over 4-row
 * groups widened once per thread (`$fp8qwiden`, `$rows_fp8q`); off the grid each token takes the 1-token
 * kernel.
 * `pnpm exec tsx packages/engine/wasm/fp8tiles.ts` rewrites the section (`--check` compares), then
 * `pnpm --filter @orchard/engine build:wasm`.
 */
import { fileURLToPath } from 'node:url';
import { tiledRowsDriver, transposeStore4 } from './qtiles.js';
import { type Section, runGenerator, withGenerated } from './sections.js';

/**
 * Locals and constants the 16-code decode uses (kept in locals: V8 rebuilds a v128.const at every use).
 * E4M3 code c as f32: sign to bit 31 and the 7 exponent/mantissa bits to bits 26..20 give value·2^-120
 * (E4M3's bias 7 against f32's 127; its subnormals become f32 subnormals, which WASM keeps). Built per 8
 * codes in i16 lanes: c into the high byte (interleaved with zero bytes: V8's punpck{l,h}bw), an
 * arithmetic shift by 4 (sign to bits 15..11, the 7 bits to 10..4), bits 14..11 cleared; then each i16
 * interleaved with a zero i16 into the high half of an f32: ~10 ops per 16 codes.
 */
const DECODE_LOCALS = '(local $v v128) (local $h0 v128) (local $h1 v128) (local $t0 v128) (local $t1 v128) (local $t2 v128) (local $t3 v128) (local $zero v128) (local $kbits v128) (local $km v128)';

function decodeInit(ind: string): string[] {
  return [
    `${ind}(local.set $kbits (v128.const i16x8 0x87f0 0x87f0 0x87f0 0x87f0 0x87f0 0x87f0 0x87f0 0x87f0))`,
    `${ind}(local.set $km (v128.const i32x4 0x87f00000 0x87f00000 0x87f00000 0x87f00000))`,
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

/**
 * The 16 codes at address `at` as the bits of value·2^-120, strided: codes j, j+4, j+8, j+12 in $tj. Each
 * i32 lane holds 4 codes; shifting code j's byte to the top (left by 24 − 8j), then arithmetically right
 * by 4 and masking (sign and bits 26..20) builds it in place: 11 ALU ops and no shuffle (V8's byte and
 * word interleaves of the form above compete for the shuffle port). The activations come in the same
 * order (the backend's fp8_prep_x).
 */
function decodeStrided16(ind: string, at: string): string[] {
  const L = [`${ind}(local.set $v (v128.load ${at}))`];
  for (const j of [0, 1, 2, 3]) {
    const top = j === 3 ? '(local.get $v)' : `(i32x4.shl (local.get $v) (i32.const ${24 - 8 * j}))`;
    L.push(`${ind}(local.set $t${j} (v128.and (i32x4.shr_s ${top} (i32.const 4)) (local.get $km)))`);
  }
  return L;
}

/**
 * R rows (w, w + rb) against one token (decode), as the header says: $dot1_fp8 and $dot2_fp8 (which
 * loads each activation vector once for both rows; $dot4_fp8 is two of it).
 */
function dotRows(R: 1 | 2): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const rs = R === 1 ? [0] : [0, 1];
  e(`  (func $dot${R}_fp8 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)`);
  e(`    (local $nb i32) (local $q i32) (local $b i32) (local $c i32) (local $end i32) (local $vend i32) (local $xc i32) (local $c0 i32)`);
  e(`    ${rs.map((r) => `(local $a${r}0 v128) (local $a${r}1 v128) (local $s${r} f32) (local $total${r} f32)`).join(' ')}`);
  e(`    (local $x0 v128) (local $x1 v128) (local $x2 v128) (local $x3 v128)`);
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
  for (const r of rs) {
    e(`        (local.set $a${r}0 (v128.const i32x4 0 0 0 0))`);
    e(`        (local.set $a${r}1 (v128.const i32x4 0 0 0 0))`);
  }
  e(`        (block $vdone`);
  e(`          (loop $vl`);
  e(`            (br_if $vdone (i32.ge_u (local.get $c) (local.get $vend)))`);
  e(`            (local.set $xc (i32.add (local.get $x) (i32.shl (local.get $c) (i32.const 2))))`);
  for (const j of [0, 1, 2, 3]) e(`            (local.set $x${j} (v128.load offset=${16 * j} (local.get $xc)))`);
  for (const r of rs) {
    L.push(...decodeStrided16('            ', r === 0 ? '(i32.add (local.get $q) (local.get $c))' : '(i32.add (i32.add (local.get $q) (local.get $rb)) (local.get $c))'));
    e(`            (local.set $a${r}0 (f32x4.muladd2 (local.get $a${r}0) (local.get $t0) (local.get $x0) (local.get $t1) (local.get $x1)))`);
    e(`            (local.set $a${r}1 (f32x4.muladd2 (local.get $a${r}1) (local.get $t2) (local.get $x2) (local.get $t3) (local.get $x3)))`);
  }
  e(`            (local.set $c (i32.add (local.get $c) (i32.const 16)))`);
  e(`            (br $vl)))`);
  e(`        (local.set $c0 (local.get $c))`);
  for (const r of rs) {
    const row = r === 0 ? '(local.get $q)' : '(i32.add (local.get $q) (local.get $rb))';
    e(`        (local.set $a${r}0 (f32x4.add (local.get $a${r}0) (local.get $a${r}1)))`);
    e(`        (local.set $s${r} (f32x4.lanesum (local.get $a${r}0)))`);
    e(`        (local.set $c (local.get $c0))`);
    e(`        (block $tdone${r}`);
    e(`          (loop $tl${r}`);
    e(`            (br_if $tdone${r} (i32.ge_u (local.get $c) (local.get $end)))`);
    e(`            (local.set $s${r} (f32.add (local.get $s${r})`);
    e(`              (f32.mul (call $fp8code (i32.load8_u (i32.add ${row} (local.get $c))))`);
    e(`                       (f32.load (i32.add (local.get $x) (i32.shl (local.get $c) (i32.const 2)))))))`);
    e(`            (local.set $c (i32.add (local.get $c) (i32.const 1)))`);
    e(`            (br $tl${r})))`);
    e(`        (local.set $total${r} (f32.add (local.get $total${r})`);
    e(`          (f32.mul (f32.mul (local.get $s${r}) (f32.const 0x1p56)) (f32.load (i32.add ${r === 0 ? '(local.get $w)' : '(i32.add (local.get $w) (local.get $rb))'} (i32.shl (local.get $b) (i32.const 2)))))))`);
  }
  e(`        (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
  e(`        (br $bl)))`);
  rs.forEach((r, i) => e(`    (f32.store offset=${4 * r} (local.get $out) (local.get $total${r}))${i === rs.length - 1 ? ')' : ''}`));
  e(``);
  return L;
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
 * 8-bit activations (q8_0's) flipped a random model's greedy tokens. A block with a NaN code has a NaN
 * factor from load (quant/fp8.ts markNanBlocks), so its row is NaN for every token, as in the 1-token
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
  e(`    (local $c9 v128) (local $c21 v128) (local $c118 v128) (local $half v128) (local $cff v128) (local $k7f v128)`);
  L.push(...decodeInit('    '));
  e(`    (local.set $k7f (v128.const i8x16 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f 0x7f))`);
  e(`    ${splat('c9', '9')}`);
  e(`    ${splat('c21', '21')}`);
  e(`    ${splat('c118', '118')}`);
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
  e(`        ;; included) and the row's factor scale·2^(s−9)`);
  e(`        (local.set $sh (i32x4.max_s (i32x4.sub (i32x4.shr_u (local.get $mx) (i32.const 3)) (local.get $c9)) (local.get $zero)))`);
  e(`        (local.set $round (v128.or (i32x4.shl (i32x4.add (local.get $sh) (local.get $c21)) (i32.const 23)) (local.get $half)))`);
  e(`        (local.set $sb (i32.shl (i32.shr_u (local.get $b) (i32.const 2)) (i32.const 2)))`);
  e(`        (v128.store offset=${16 * ws} (local.get $o)`);
  e(`          (f32x4.mul (f32x4.replace_lane 3 (f32x4.replace_lane 2 (f32x4.replace_lane 1 (f32x4.splat (f32.load (i32.add (local.get $p0) (local.get $sb))))`);
  e(`            (f32.load (i32.add (local.get $p1) (local.get $sb)))) (f32.load (i32.add (local.get $p2) (local.get $sb)))) (f32.load (i32.add (local.get $p3) (local.get $sb))))`);
  e(`            (i32x4.shl (i32x4.add (local.get $sh) (local.get $c118)) (i32.const 23))))`);
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
    '  ;; ---------------------------------------------------------------- FP8: 1 token, prompt batches (see wasm/fp8tiles.ts)',
    ...dotRows(1),
    ...dotRows(2),
    ...qwiden(16),
    ...qwiden(32),
    ...rowsFp8q(),
  ].join('\n');
}

export const FP8TILE_SECTION: Section = { name: 'fp8tile', script: 'fp8tiles.ts', text: fp8tileSection };

export const withFp8tileSection = (wat: string) => withGenerated(wat, FP8TILE_SECTION);

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) runGenerator(FP8TILE_SECTION, process.argv);
