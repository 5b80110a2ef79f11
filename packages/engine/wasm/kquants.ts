/**
 * Writes the K-quant section of kernels.wat (between the `>>> kquant` / `<<< kquant` markers): the
 * q4_k / q5_k / q6_k dot kernels and their activation quantizer. The three formats share one shape —
 * widen a run of 8 packed weights to i16, multiply by the sub-block scale in i16, one
 * `i32x4.dot_i16x8_s` with the 8-bit activations — and differ only in how the bits are unpacked, so
 * they are generated. `pnpm exec tsx packages/engine/wasm/kquants.ts` rewrites the section (`--check`
 * compares), then `pnpm --filter @orchard/engine build:wasm`.
 */
import { fileURLToPath } from 'node:url';
import { T, interleaveRows4, nibbleQuads, relaxedKLoop, relaxedTileDriver, relaxedTileEnd, relaxedTileHead, tileKernels, tileShape, tiledRowsDriver, transposeStore4 } from './qtiles.js';
import { type Section, runGenerator, withGenerated } from './sections.js';
import { bothVariants } from './variants.js';

const HEADER = `  ;; ---------------------------------------------------------------- q4_k / q5_k / q6_k
  ;; Super-blocks of 256 weights (layouts in src/quant/kquants.ts). Activations (quant_q8k, ggml's
  ;; Q8_K): per token cols i16 q, then per super-block the f32 scale d_x, then per super-block 8 i16
  ;; sums of q over each 32-column sub-block (for the q4_k/q5_k mins).
  ;; Per super-block everything but the f32 steps is exact integer arithmetic: 8 weights are widened to
  ;; i16 (q <= 31, or q − 32 for q6_k), multiplied in i16 by their sub-block's scale (|q·sc| <= 4096), and
  ;; one i32x4.dot_i16x8_s with 8 activations adds them to the super-block's integer total. Then, as ggml's
  ;; x86 kernels (separate accumulators for the mins):
  ;;   s += f32(Σ sc·q·x)·(d_w·d_x);   m += f32(Σ m·Σx)·(dmin·d_x);   out = s − m   (q4_k, q5_k)
  ;;   s += f32(Σ sc·(q − 32)·x)·(d_w·d_x)                                          (q6_k)
  ;; in super-block order. Totals stay below 2^31; past 2^24 their f32 conversion rounds (as ggml's).
  ;; Packed q4_k's prompt batches run the token tiles over whole super-blocks on the same integers and
  ;; f32 steps ($ktiles8/4, $kmins4), so a batch gives the 1-token bits.
  ;; The 4-row kernels run the 1-row kernel row by row (one sequential stream each, same bits).
  ;; The relaxed build (wasm/variants.ts) writes, in place of the q4 form, the plain q as int8 and each
  ;; 16 columns' Σq, and its kernels take the weights as bytes against those with relaxed int8 dots.
`;

const i16 = (v: number) => `(v128.const i16x8 ${Array(8).fill(v).join(' ')})`;
/** An i32x4 constant with `m` in every lane. */
const mask = (m: string) => `(v128.const i32x4 ${m} ${m} ${m} ${m})`;

/** Sub-block j's 6-bit scale from the decoded words $sl (j < 4) / $sh (j >= 4). */
const scaleOf = (j: number) => `(i32.and (i32.shr_u (local.get $${j < 4 ? 'sl' : 'sh'}) (i32.const ${8 * (j % 4)})) (i32.const 255))`;

/** q4_k and q5_k: 4 runs of 32 bytes, run c holds sub-block 2c (low nibbles) and 2c+1 (high). */
function q45(five: boolean): string[] {
  const name = five ? 'q5_k' : 'q4_k';
  const bb = five ? 176 : 144;
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`  ;; ${name}, one row. The 12 scale bytes decode into words $sl (sc 0-3), $sh (sc 4-7) and, for the mins,`);
  e(`  ;; m 0-3 / m 4-7 (one byte each); ${five ? 'bit j of qh[l] is the fifth bit of element l of sub-block j.' : 'w = d·sc·q − dmin·m.'}`);
  e(`  (func $dot1_${name} (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)`);
  e(`    (local $p i32) (local $end i32) (local $xq i32) (local $xd i32) (local $xb i32)`);
  e(`    (local $u0 i32) (local $u1 i32) (local $u2 i32) (local $sl i32) (local $sh i32)`);
  e(`    (local $t v128) (local $v v128) (local $h v128) (local $a v128) (local $b v128) (local $s f32) (local $m f32)`);
  // the relaxed runs' byte masks in locals: V8 builds a v128.const afresh at every use (3 instructions)
  L.push(...bothVariants('    ', [
    `    (local $x8 i32) (local $m15 v128) (local $m16 v128)${five ? ' (local $q i32) (local $xc i32) (local $sc8 i64) (local $h0 v128) (local $h1 v128) (local $v0 v128) (local $v1 v128)' : ''}`,
    `    (local.set $x8 (i32.add (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))) (i32.mul (i32.shr_u (local.get $cols) (i32.const 8)) (i32.const 20))))`,
    `    (local.set $m15 (v128.const i8x16 ${Array(16).fill(15).join(' ')}))`,
    `    (local.set $m16 (v128.const i8x16 ${Array(16).fill(16).join(' ')}))`,
  ], []));
  e(`    (local.set $p (local.get $w))`);
  e(`    (local.set $end (i32.add (local.get $w) (local.get $rb)))`);
  e(`    (local.set $xq (local.get $x))`);
  e(`    (local.set $xd (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))))`);
  e(`    (local.set $xb (i32.add (local.get $xd) (i32.shr_u (local.get $cols) (i32.const 6))))`);
  e(`    (block $done`);
  e(`      (loop $l`);
  e(`        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))`);
  L.push(...q45Core(five, five));
  e(`        (local.set $s (f32.add (local.get $s) (f32.mul (f32.convert_i32_s (call $hsum_i32 (local.get $t)))`);
  e(`          (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u (local.get $p)) (i32.const 2))) (f32.load (local.get $xd))))))`);
  e(`        ;; mins: m 0-7 as i16 against the 8 sub-block sums of the activations`);
  e(`        (local.set $v (i32x4.dot_i16x8_s`);
  e(`          (i16x8.extend_low_i8x16_u (i32x4.replace_lane 1 (i32x4.splat (i32.and (local.get $u1) (i32.const 0x3f3f3f3f)))`);
  e(`            (i32.or (i32.and (i32.shr_u (local.get $u2) (i32.const 4)) (i32.const 0x0f0f0f0f))`);
  e(`              (i32.shl (i32.and (i32.shr_u (local.get $u1) (i32.const 6)) (i32.const 0x03030303)) (i32.const 4)))))`);
  e(`          (v128.load (local.get $xb))))`);
  e(`        (local.set $m (f32.add (local.get $m) (f32.mul (f32.convert_i32_s (call $hsum_i32 (local.get $v)))`);
  e(`          (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u offset=2 (local.get $p)) (i32.const 2))) (f32.load (local.get $xd))))))`);
  e(`        (local.set $p (i32.add (local.get $p) (i32.const ${bb})))`);
  e(`        (local.set $xq (i32.add (local.get $xq) (i32.const 512)))`);
  L.push(...bothVariants('        ', [`        (local.set $x8 (i32.add (local.get $x8) (i32.const 256)))`], []));
  e(`        (local.set $xd (i32.add (local.get $xd) (i32.const 4)))`);
  e(`        (local.set $xb (i32.add (local.get $xb) (i32.const 16)))`);
  e(`        (br $l)))`);
  e(`    (f32.store (local.get $out) (f32.sub (local.get $s) (local.get $m))))`);
  e(``);
  return L;
}

/**
 * One q4_k / q5_k super-block at $p: its scale words into $u0-$u2 / $sl / $sh and its integer total
 * Σ sc·q·x into $t (both builds); $dot1_q4_k / $dot1_q5_k and the packed $g4_q5_k share it.
 */
function q45Core(five: boolean, loop = false): string[] {
  const qs = five ? 48 : 16;
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`        (local.set $u0 (i32.load offset=4 (local.get $p)))`);
  e(`        (local.set $u1 (i32.load offset=8 (local.get $p)))`);
  e(`        (local.set $u2 (i32.load offset=12 (local.get $p)))`);
  e(`        (local.set $sl (i32.and (local.get $u0) (i32.const 0x3f3f3f3f)))`);
  e(`        (local.set $sh (i32.or (i32.and (local.get $u2) (i32.const 0x0f0f0f0f))`);
  e(`          (i32.shl (i32.and (i32.shr_u (local.get $u0) (i32.const 6)) (i32.const 0x03030303)) (i32.const 4))))`);
  e(`        (local.set $t (v128.const i32x4 0 0 0 0))`);
  const baseline: string[] = [];
  {
    const e = (s: string) => baseline.push(s);
    for (let c = 0; c < 4; c++) {
      e(`        ;; run ${c}: sub-blocks ${2 * c} (low nibbles) and ${2 * c + 1} (high)`);
      e(`        (local.set $a (i16x8.splat ${scaleOf(2 * c)}))`);
      e(`        (local.set $b (i16x8.splat ${scaleOf(2 * c + 1)}))`);
      for (let h = 0; h < 4; h++) {
        e(`        (local.set $v (v128.load8x8_u offset=${qs + 32 * c + 8 * h} (local.get $p)))`);
        let lo = `(v128.and (local.get $v) ${i16(15)})`;
        let hi = `(i16x8.shr_u (local.get $v) (i32.const 4))`;
        if (five) {
          e(`        (local.set $h (v128.load8x8_u offset=${16 + 8 * h} (local.get $p)))`);
          // bit 2c (low sub-block) and 2c+1 (high) of qh, moved to bit 4
          const bit = (k: number) => (k <= 4 ? `(i16x8.shl (local.get $h) (i32.const ${4 - k}))` : `(i16x8.shr_u (local.get $h) (i32.const ${k - 4}))`);
          lo = `(v128.or ${lo} (v128.and ${bit(2 * c)} ${i16(16)}))`;
          hi = `(v128.or ${hi} (v128.and ${bit(2 * c + 1)} ${i16(16)}))`;
        }
        e(`        (local.set $t (i32x4.add (local.get $t) (i32x4.dot_i16x8_s (i16x8.mul ${lo} (local.get $a)) (v128.load offset=${2 * (64 * c + 8 * h)} (local.get $xq)))))`);
        e(`        (local.set $t (i32x4.add (local.get $t) (i32x4.dot_i16x8_s (i16x8.mul ${hi} (local.get $b)) (v128.load offset=${2 * (64 * c + 32 + 8 * h)} (local.get $xq)))))`);
      }
    }
  }
  L.push(...bothVariants('        ', loop ? q5RelaxedLoop() : q45RelaxedRuns(five, qs), baseline));
  return L;
}

/**
 * q5_k's runs in the relaxed build as a loop over the 4 runs: the same integers as q45RelaxedRuns, but
 * with the runs unrolled TurboFan hoists all ~30 loads of a row's super-block to its top and spills them
 * to the stack (a store and a reload each); a loop body keeps them in registers. Per run c the scales
 * 2c and 2c+1 are the low bytes of $sc8 (shifted 16 bits per run), and qh's two halves $h0 / $h1 are
 * shifted right 2 bits per run (an i16 shift: bits 0 and 1 of each byte stay that byte's bits 2c, 2c+1),
 * so bit 0 moved to bit 4 is sub-block 2c's fifth bit, bit 1 sub-block 2c+1's.
 */
function q5RelaxedLoop(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`        (local.set $sc8 (i64.or (i64.extend_i32_u (local.get $sl)) (i64.shl (i64.extend_i32_u (local.get $sh)) (i64.const 32))))`);
  e(`        (local.set $h0 (v128.load offset=16 (local.get $p)))`);
  e(`        (local.set $h1 (v128.load offset=32 (local.get $p)))`);
  e(`        (local.set $q (local.get $p))`);
  e(`        (local.set $xc (local.get $x8))`);
  e(`        (loop $runs`);
  e(`          (local.set $a (i16x8.splat (i32.and (i32.wrap_i64 (local.get $sc8)) (i32.const 255))))`);
  e(`          (local.set $b (i16x8.splat (i32.and (i32.wrap_i64 (i64.shr_u (local.get $sc8) (i64.const 8))) (i32.const 255))))`);
  // each sub-block's two 16-element halves added in i16 before one scale dot: pair sums <= 2·31·127, two
  // of them <= 15748, no wrap
  const dot = (half: number, off: number, q: string) =>
    `(i16x8.relaxed_dot_i8x16_i7x16_s (v128.load offset=${off + 16 * half} (local.get $xc)) ${q})`;
  const lo = (half: number) => `(v128.or (v128.and (local.get $v${half}) (local.get $m15)) (v128.and (i16x8.shl (local.get $h${half}) (i32.const 4)) (local.get $m16)))`;
  const hi = (half: number) => `(v128.or (v128.and (i16x8.shr_u (local.get $v${half}) (i32.const 4)) (local.get $m15)) (v128.and (i16x8.shl (local.get $h${half}) (i32.const 3)) (local.get $m16)))`;
  e(`          (local.set $v0 (v128.load offset=48 (local.get $q)))`);
  e(`          (local.set $v1 (v128.load offset=64 (local.get $q)))`);
  e(`          (local.set $t (i32x4.add (local.get $t) (i32x4.dot_i16x8_s (i16x8.add ${dot(0, 0, lo(0))}`);
  e(`            ${dot(1, 0, lo(1))}) (local.get $a))))`);
  e(`          (local.set $t (i32x4.add (local.get $t) (i32x4.dot_i16x8_s (i16x8.add ${dot(0, 32, hi(0))}`);
  e(`            ${dot(1, 32, hi(1))}) (local.get $b))))`);
  e(`          (local.set $h0 (i16x8.shr_u (local.get $h0) (i32.const 2)))`);
  e(`          (local.set $h1 (i16x8.shr_u (local.get $h1) (i32.const 2)))`);
  e(`          (local.set $sc8 (i64.shr_u (local.get $sc8) (i64.const 16)))`);
  e(`          (local.set $q (i32.add (local.get $q) (i32.const 32)))`);
  e(`          (local.set $xc (i32.add (local.get $xc) (i32.const 64)))`);
  e(`          (br_if $runs (i32.lt_u (local.get $xc) (i32.add (local.get $x8) (i32.const 256)))))`);
  return L;
}

/**
 * q4_k / q5_k runs in the relaxed build: per run c and 16-byte half, the low nibbles (sub-block 2c) and
 * high nibbles (2c + 1), with q5_k's fifth bit from qh, as bytes (0..31, a valid i7 operand) against the
 * int8 activations at $x8 (quant_q8k's relaxed form): one i16x8.relaxed_dot_i8x16_i7x16_s per 16
 * elements, then one i32x4.dot_i16x8_s with the sub-block's scale. The same integer total as the baseline.
 */
function q45RelaxedRuns(five: boolean, qs: number): string[] {
  const L: string[] = [];
  for (let c = 0; c < 4; c++) {
    L.push(`        ;; run ${c}: sub-blocks ${2 * c} (low nibbles) and ${2 * c + 1} (high)`);
    L.push(`        (local.set $a (i16x8.splat ${scaleOf(2 * c)}))`);
    L.push(`        (local.set $b (i16x8.splat ${scaleOf(2 * c + 1)}))`);
    for (let half = 0; half < 2; half++) {
      L.push(`        (local.set $v (v128.load offset=${qs + 32 * c + 16 * half} (local.get $p)))`);
      let lo = `(v128.and (local.get $v) (local.get $m15))`;
      let hi = `(v128.and (i16x8.shr_u (local.get $v) (i32.const 4)) (local.get $m15))`;
      if (five) {
        L.push(`        (local.set $h (v128.load offset=${16 + 16 * half} (local.get $p)))`);
        // bit k = 2c (low sub-block) or 2c+1 (high) of each qh byte moved to bit 4 by one i16 shift, then
        // masked per byte: bit 4 of either byte of a lane comes from bit 4 − (left shift) or 4 + (right
        // shift) of the same byte (shifts of at most 4 left, 3 right), so the other byte never leaks in
        const bit = (k: number) => `(v128.and ${k < 4 ? `(i16x8.shl (local.get $h) (i32.const ${4 - k}))` : k === 4 ? '(local.get $h)' : `(i16x8.shr_u (local.get $h) (i32.const ${k - 4}))`} (local.get $m16))`;
        lo = `(v128.or ${lo} ${bit(2 * c)})`;
        hi = `(v128.or ${hi} ${bit(2 * c + 1)})`;
      }
      for (const [q, sc, off] of [[lo, '$a', 64 * c + 16 * half], [hi, '$b', 64 * c + 32 + 16 * half]] as const) {
        L.push(`        (local.set $t (i32x4.add (local.get $t) (i32x4.dot_i16x8_s`);
        L.push(`          (i16x8.relaxed_dot_i8x16_i7x16_s (v128.load offset=${off} (local.get $x8)) ${q}) (local.get ${sc}))))`);
      }
    }
  }
  return L;
}

/**
 * q6_k's four element groups k of a run of 8 as i16 (0..63): from the ql bytes a (groups 0, 2) and b
 * (1, 3), widened to i16, low or high nibble, and the qh byte's bits 2k..2k+1 on top.
 */
const q6Groups = (la: string, lb: string, h: string): string[] => [
  `(v128.or (v128.and ${la} ${i16(15)}) (i16x8.shl (v128.and ${h} ${i16(3)}) (i32.const 4)))`,
  `(v128.or (v128.and ${lb} ${i16(15)}) (i16x8.shl (v128.and ${h} ${i16(12)}) (i32.const 2)))`,
  `(v128.or (i16x8.shr_u ${la} (i32.const 4)) (v128.and ${h} ${i16(48)}))`,
  `(v128.or (i16x8.shr_u ${lb} (i32.const 4)) (i16x8.shr_u (v128.and ${h} ${i16(192)}) (i32.const 2)))`,
];

/** One q6_k super-block at $p, baseline build: its integer total Σ sc·(q − 32)·x into $t (i16 activations at $xq). */
function q6CoreBaseline(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`        (local.set $t (v128.const i32x4 0 0 0 0))`);
  const q = q6Groups('(local.get $la)', '(local.get $lb)', '(local.get $h)');
  for (let n = 0; n < 2; n++) {
    for (let lh = 0; lh < 2; lh++) {
      e(`        ;; half ${n}, l ${16 * lh}..${16 * lh + 15}: sub-blocks ${8 * n + lh}, ${8 * n + lh + 2}, ${8 * n + lh + 4}, ${8 * n + lh + 6}`);
      for (let k = 0; k < 4; k++) e(`        (local.set $a${k} (i16x8.splat (i32.load8_s offset=${192 + 8 * n + lh + 2 * k} (local.get $p))))`);
      for (const h of [2 * lh, 2 * lh + 1]) {
        e(`        (local.set $la (v128.load8x8_u offset=${64 * n + 8 * h} (local.get $p)))`);
        e(`        (local.set $lb (v128.load8x8_u offset=${64 * n + 32 + 8 * h} (local.get $p)))`);
        e(`        (local.set $h (v128.load8x8_u offset=${128 + 32 * n + 8 * h} (local.get $p)))`);
        for (let k = 0; k < 4; k++) {
          e(`        (local.set $t (i32x4.add (local.get $t) (i32x4.dot_i16x8_s`);
          e(`          (i16x8.mul (i16x8.sub ${q[k]} ${i16(32)}) (local.get $a${k}))`);
          e(`          (v128.load offset=${2 * (128 * n + 32 * k + 8 * h)} (local.get $xq)))))`);
        }
      }
    }
  }
  return L;
}

/** q6_k: ql (128), qh (64), 16 int8 scales, f16 d at 208. */
function q6Baseline(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`  ;; q6_k, one row. Half n of the block: element 128n + 32k + l takes the low (k < 2) or high nibble of`);
  e(`  ;; ql[64n + 32(k&1) + l] and bits 2k..2k+1 of qh[32n + l]; sub-blocks of 16, int8 scales.`);
  e(`  (func $dot1_q6_k (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)`);
  e(`    (local $p i32) (local $end i32) (local $xq i32) (local $xd i32)`);
  e(`    (local $t v128) (local $la v128) (local $lb v128) (local $h v128)`);
  e(`    (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $s f32)`);
  e(`    (local.set $p (local.get $w))`);
  e(`    (local.set $end (i32.add (local.get $w) (local.get $rb)))`);
  e(`    (local.set $xq (local.get $x))`);
  e(`    (local.set $xd (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))))`);
  e(`    (block $done`);
  e(`      (loop $l`);
  e(`        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))`);
  L.push(...q6CoreBaseline());
  e(`        (local.set $s (f32.add (local.get $s) (f32.mul (f32.convert_i32_s (call $hsum_i32 (local.get $t)))`);
  e(`          (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u offset=208 (local.get $p)) (i32.const 2))) (f32.load (local.get $xd))))))`);
  e(`        (local.set $p (i32.add (local.get $p) (i32.const 210)))`);
  e(`        (local.set $xq (i32.add (local.get $xq) (i32.const 512)))`);
  e(`        (local.set $xd (i32.add (local.get $xd) (i32.const 4)))`);
  e(`        (br $l)))`);
  e(`    (f32.store (local.get $out) (local.get $s)))`);
  e(``);
  return L;
}

/**
 * One q6_k super-block at $p, relaxed build: the same integer total into $t (int8 activations at $xq,
 * 16-column sums at $xs). A loop over the 4 (half n, 16-element half) pairs, each with its 4 groups k:
 * unrolled, TurboFan hoisted the super-block's ~40 loads to its top and spilled them (as in q5_k).
 */
function q6CoreRelaxed(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`        ;; the −32 offset: 32·Σ_j sc_j·Σx_j over the 16 sub-blocks, taken off first`);
  e(`        (local.set $t (i32x4.mul (i32x4.add`);
  e(`          (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_s (v128.load offset=192 (local.get $p))) (v128.load offset=0 (local.get $xs)))`);
  e(`          (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_s (v128.load offset=192 (local.get $p))) (v128.load offset=16 (local.get $xs))))`);
  e(`          (v128.const i32x4 -32 -32 -32 -32)))`);
  e(`        ;; pass i = 2n + half: ql at 64n + 16·half, qh at 128 + 32n + 16·half, x at 128n + 16·half, scales at 192 + 8n + half`);
  e(`        (local.set $i6 (i32.const 0))`);
  e(`        (loop $q6l`);
  e(`          (local.set $o6 (i32.add (local.get $p) (i32.add (i32.shl (i32.and (local.get $i6) (i32.const 1)) (i32.const 4)) (i32.shl (i32.shr_u (local.get $i6) (i32.const 1)) (i32.const 6)))))`);
  e(`          (local.set $x6 (i32.add (local.get $xq) (i32.add (i32.shl (i32.and (local.get $i6) (i32.const 1)) (i32.const 4)) (i32.shl (i32.shr_u (local.get $i6) (i32.const 1)) (i32.const 7)))))`);
  e(`          (local.set $s6 (i32.add (local.get $p) (i32.add (i32.and (local.get $i6) (i32.const 1)) (i32.shl (i32.shr_u (local.get $i6) (i32.const 1)) (i32.const 3)))))`);
  e(`          (local.set $h (v128.load offset=128 (i32.sub (local.get $o6) (i32.shl (i32.shr_u (local.get $i6) (i32.const 1)) (i32.const 5)))))`);
  for (let k = 0; k < 4; k++) {
    const ql = `(v128.load offset=${32 * (k & 1)} (local.get $o6))`;
    const lo = k < 2 ? `(v128.and ${ql} (local.get $m15))` : `(v128.and (i16x8.shr_u ${ql} (i32.const 4)) (local.get $m15))`;
    // qh bits 2k..2k+1 of each byte to bits 4..5 by one i16 shift, then masked per byte: at most 4
    // left or 2 right, bits 4..5 of either byte of a lane come from the same byte
    const hs = k < 2 ? `(i16x8.shl (local.get $h) (i32.const ${4 - 2 * k}))` : k === 2 ? '(local.get $h)' : '(i16x8.shr_u (local.get $h) (i32.const 2))';
    e(`          ;; group ${k}: sub-block 8n + ${2 * k} + half`);
    e(`          (local.set $t (i32x4.add (local.get $t) (i32x4.dot_i16x8_s`);
    e(`            (i16x8.relaxed_dot_i8x16_i7x16_s (v128.load offset=${32 * k} (local.get $x6)) (v128.or ${lo} (v128.and ${hs} (local.get $m48))))`);
    e(`            (i16x8.splat (i32.load8_s offset=${192 + 2 * k} (local.get $s6))))))`);
  }
  e(`          (br_if $q6l (i32.lt_u (local.tee $i6 (i32.add (local.get $i6) (i32.const 1))) (i32.const 4))))`);
  return L;
}

/**
 * q6_k, one row, in the relaxed build: per (half n, group k) the 32 elements 128n + 32k + l come from
 * 32 consecutive ql and qh bytes, so their 6-bit values (0..63, a valid i7 operand) are built as bytes
 * and taken against the int8 activations (quant_q8k's relaxed form) with one
 * i16x8.relaxed_dot_i8x16_i7x16_s per 16 (pair sums ≤ 2·63·127), then one i32x4.dot_i16x8_s with the
 * sub-block's scale. The −32 offset is one dot per super-block: 32·Σ sc·Σx over the 16-column sub-blocks
 * (their sums are in the activations too). The integer total, hence the f32 step and the bits, is the
 * baseline's.
 */
function q6Relaxed(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const b16 = (v: number) => `(v128.const i8x16 ${Array(16).fill(v).join(' ')})`;
  e(`  (func $dot1_q6_k (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)`);
  e(`    (local $p i32) (local $end i32) (local $xq i32) (local $xd i32) (local $xs i32)`);
  e(`    (local $t v128) (local $q v128) (local $h v128) (local $s f32) (local $m15 v128) (local $m48 v128) (local $i6 i32) (local $o6 i32) (local $x6 i32) (local $s6 i32)`);
  // byte masks in locals: V8 builds a v128.const afresh at every use (3 instructions)
  e(`    (local.set $m15 ${b16(15)})`);
  e(`    (local.set $m48 ${b16(48)})`);
  e(`    (local.set $p (local.get $w))`);
  e(`    (local.set $end (i32.add (local.get $w) (local.get $rb)))`);
  e(`    (local.set $xd (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))))`);
  e(`    (local.set $xq (i32.add (local.get $xd) (i32.mul (i32.shr_u (local.get $cols) (i32.const 8)) (i32.const 20))))`);
  e(`    (local.set $xs (i32.add (local.get $xq) (local.get $cols)))`);
  e(`    (block $done`);
  e(`      (loop $l`);
  e(`        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))`);
  L.push(...q6CoreRelaxed());
  e(`        (local.set $s (f32.add (local.get $s) (f32.mul (f32.convert_i32_s (call $hsum_i32 (local.get $t)))`);
  e(`          (f32.mul (f32.load offset=4096 (i32.shl (i32.load16_u offset=208 (local.get $p)) (i32.const 2))) (f32.load (local.get $xd))))))`);
  e(`        (local.set $p (i32.add (local.get $p) (i32.const 210)))`);
  e(`        (local.set $xq (i32.add (local.get $xq) (i32.const 256)))`);
  e(`        (local.set $xs (i32.add (local.get $xs) (i32.const 32)))`);
  e(`        (local.set $xd (i32.add (local.get $xd) (i32.const 4)))`);
  e(`        (br $l)))`);
  e(`    (f32.store (local.get $out) (local.get $s)))`);
  e(``);
  return L;
}

/** q6_k, one row: the relaxed build's kernel or the baseline's. */
const q6 = (): string[] => bothVariants('  ', q6Relaxed(), q6Baseline());

/** The 4-row kernel of a format: its 1-row kernel on each row (one stream at a time). */
function dot4(name: string): string[] {
  return [
    `  (func $dot4_${name} (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)`,
    `    (call $dot1_${name} (local.get $w) (local.get $rb) (local.get $x) (local.get $cols) (local.get $out))`,
    `    (call $dot1_${name} (i32.add (local.get $w) (local.get $rb)) (local.get $rb) (local.get $x) (local.get $cols) (i32.add (local.get $out) (i32.const 4)))`,
    `    (call $dot1_${name} (i32.add (local.get $w) (i32.shl (local.get $rb) (i32.const 1))) (local.get $rb) (local.get $x) (local.get $cols) (i32.add (local.get $out) (i32.const 8)))`,
    `    (call $dot1_${name} (i32.add (local.get $w) (i32.mul (local.get $rb) (i32.const 3))) (local.get $rb) (local.get $x) (local.get $cols) (i32.add (local.get $out) (i32.const 12))))`,
    ``,
  ];
}

/** quant_q8k: n tokens of cols floats (cols % 256 == 0) into the K-quant activation format. */
function quantQ8k(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`  ;; n tokens of cols floats (cols % 256 == 0) into the K-quant activation format, cols·4 + (cols/256)·20`);
  e(`  ;; bytes per token: q, scales, sums (see the header), then q again in the q4 form. Per super-block`);
  e(`  ;; iscale = 127/amax, d = 1/iscale (ggml's Q8_K: its −127/max flips the signs of both q and d),`);
  e(`  ;; q = nearest-even(x·iscale); an all-zero block has d = 0, q = 0.`);
  e(`  (func (export "quant_q8k") (param $x i32) (param $dst i32) (param $cols i32) (param $n i32)`);
  e(`    (local $b i32) (local $nsb i32) (local $sb i32) (local $s i32) (local $q i32) (local $dd i32) (local $bs i32) (local $j i32)`);
  e(`    (local $mx v128) (local $id v128) (local $q0 v128) (local $q1 v128) (local $amax f32) (local $is f32)`);
  e(`    (local.set $nsb (i32.shr_u (local.get $cols) (i32.const 8)))`);
  e(`    (local.set $s (local.get $x))`);
  e(`    (local.set $q (local.get $dst))`);
  e(`    (block $bdone`);
  e(`      (loop $bl`);
  e(`        (br_if $bdone (i32.ge_u (local.get $b) (local.get $n)))`);
  e(`        (local.set $dd (i32.add (local.get $q) (i32.shl (local.get $cols) (i32.const 1))))`);
  e(`        (local.set $bs (i32.add (local.get $dd) (i32.shl (local.get $nsb) (i32.const 2))))`);
  e(`        (local.set $sb (i32.const 0))`);
  e(`        (block $sdone`);
  e(`          (loop $sl`);
  e(`            (br_if $sdone (i32.ge_u (local.get $sb) (local.get $nsb)))`);
  e(`            (local.set $mx (v128.const i32x4 0 0 0 0))`);
  e(`            (local.set $j (i32.const 0))`);
  e(`            (block $mdone`);
  e(`              (loop $ml`);
  e(`                (br_if $mdone (i32.ge_u (local.get $j) (i32.const 1024)))`);
  e(`                ;; |x|'s bits order as |x| does (see quant_q8)`);
  e(`                (local.set $mx (i32x4.max_s (local.get $mx) (f32x4.abs (v128.load (i32.add (local.get $s) (local.get $j))))))`);
  e(`                (local.set $j (i32.add (local.get $j) (i32.const 16)))`);
  e(`                (br $ml)))`);
  e(`            (local.set $amax (f32x4.lanemax (local.get $mx)))`);
  e(`            (local.set $is (if (result f32) (f32.gt (local.get $amax) (f32.const 0))`);
  e(`              (then (f32.div (f32.const 127) (local.get $amax))) (else (f32.const 0))))`);
  e(`            (f32.store (local.get $dd) (if (result f32) (f32.gt (local.get $is) (f32.const 0))`);
  e(`              (then (f32.div (f32.const 1) (local.get $is))) (else (f32.const 0))))`);
  e(`            (local.set $id (f32x4.splat (local.get $is)))`);
  e(`            (local.set $j (i32.const 0))`);
  e(`            (block $qdone`);
  e(`              (loop $ql`);
  e(`                (br_if $qdone (i32.ge_u (local.get $j) (i32.const 8)))`);
  for (const [k, v] of [[0, 'q0'], [1, 'q1']] as const) {
    e(`                (local.set $${v} (i16x8.narrow_i32x4_s`);
    e(`                  (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (v128.load offset=${32 * k} (local.get $s)) (local.get $id))))`);
    e(`                  (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (v128.load offset=${32 * k + 16} (local.get $s)) (local.get $id))))))`);
  }
  e(`                (v128.store offset=0 (local.get $q) (local.get $q0))`);
  e(`                (v128.store offset=16 (local.get $q) (local.get $q1))`);
  e(`                (local.set $mx (i32x4.add (i32x4.extadd_pairwise_i16x8_s (local.get $q0)) (i32x4.extadd_pairwise_i16x8_s (local.get $q1))))`);
  for (const [k, v] of [[2, 'q0'], [3, 'q1']] as const) {
    e(`                (local.set $${v} (i16x8.narrow_i32x4_s`);
    e(`                  (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (v128.load offset=${32 * k} (local.get $s)) (local.get $id))))`);
    e(`                  (i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (v128.load offset=${32 * k + 16} (local.get $s)) (local.get $id))))))`);
  }
  e(`                (v128.store offset=32 (local.get $q) (local.get $q0))`);
  e(`                (v128.store offset=48 (local.get $q) (local.get $q1))`);
  e(`                (local.set $mx (i32x4.add (local.get $mx) (i32x4.add (i32x4.extadd_pairwise_i16x8_s (local.get $q0)) (i32x4.extadd_pairwise_i16x8_s (local.get $q1)))))`);
  e(`                (i32.store16 (i32.add (local.get $bs) (i32.shl (local.get $j) (i32.const 1))) (call $hsum_i32 (local.get $mx)))`);
  e(`                (local.set $s (i32.add (local.get $s) (i32.const 128)))`);
  e(`                (local.set $q (i32.add (local.get $q) (i32.const 64)))`);
  e(`                (local.set $j (i32.add (local.get $j) (i32.const 1)))`);
  e(`                (br $ql)))`);
  e(`            (local.set $dd (i32.add (local.get $dd) (i32.const 4)))`);
  e(`            (local.set $bs (i32.add (local.get $bs) (i32.const 16)))`);
  e(`            (local.set $sb (i32.add (local.get $sb) (i32.const 1)))`);
  e(`            (br $sl)))`);
  const q4form: string[] = [];
  {
    const e = (s: string) => q4form.push(s);
    e(`        ;; the q4 form for packed q4_k (see $g4_q4_k): per 32, the second half as q[l+16] − 16·q[l]`);
    e(`        (local.set $q (i32.add (local.get $q) (i32.mul (local.get $nsb) (i32.const 20))))`);
    e(`        (local.set $j (i32.const 0))`);
    e(`        (block $fdone`);
    e(`          (loop $fl`);
    e(`            (br_if $fdone (i32.ge_u (local.get $j) (local.get $cols)))`);
    e(`            (local.set $dd (i32.sub (local.get $q) (i32.add (i32.shl (local.get $cols) (i32.const 1)) (i32.mul (local.get $nsb) (i32.const 20)))))`);
    e(`            (local.set $q0 (v128.load offset=0 (local.get $dd)))`);
    e(`            (local.set $q1 (v128.load offset=16 (local.get $dd)))`);
    e(`            (v128.store offset=0 (local.get $q) (local.get $q0))`);
    e(`            (v128.store offset=16 (local.get $q) (local.get $q1))`);
    e(`            (v128.store offset=32 (local.get $q) (i16x8.sub (v128.load offset=32 (local.get $dd)) (i16x8.shl (local.get $q0) (i32.const 4))))`);
    e(`            (v128.store offset=48 (local.get $q) (i16x8.sub (v128.load offset=48 (local.get $dd)) (i16x8.shl (local.get $q1) (i32.const 4))))`);
    e(`            (local.set $q (i32.add (local.get $q) (i32.const 64)))`);
    e(`            (local.set $j (i32.add (local.get $j) (i32.const 32)))`);
    e(`            (br $fl)))`);
  }
  const i8form = [
    `        ;; relaxed build: the plain q as int8 (cols bytes), then each 16 columns' Σq as i16 ($dot1_q6_k)`,
    `        (local.set $q (i32.add (local.get $q) (i32.mul (local.get $nsb) (i32.const 20))))`,
    `        (local.set $j (i32.const 0))`,
    `        (block $fdone`,
    `          (loop $fl`,
    `            (br_if $fdone (i32.ge_u (local.get $j) (local.get $cols)))`,
    `            (local.set $dd (i32.add (i32.sub (local.get $q) (i32.add (i32.shl (local.get $cols) (i32.const 1)) (i32.mul (local.get $nsb) (i32.const 20))))`,
    `              (i32.shl (local.get $j) (i32.const 1))))`,
    `            (local.set $q0 (i8x16.narrow_i16x8_s (v128.load offset=0 (local.get $dd)) (v128.load offset=16 (local.get $dd))))`,
    `            (local.set $q1 (i8x16.narrow_i16x8_s (v128.load offset=32 (local.get $dd)) (v128.load offset=48 (local.get $dd))))`,
    `            (v128.store offset=0 (i32.add (local.get $q) (local.get $j)) (local.get $q0))`,
    `            (v128.store offset=16 (i32.add (local.get $q) (local.get $j)) (local.get $q1))`,
    `            (local.set $dd (i32.add (i32.add (local.get $q) (local.get $cols)) (i32.shr_u (local.get $j) (i32.const 3))))`,
    `            (i32.store16 offset=0 (local.get $dd) (call $hsum_i32 (i32x4.extadd_pairwise_i16x8_s (i16x8.extadd_pairwise_i8x16_s (local.get $q0)))))`,
    `            (i32.store16 offset=2 (local.get $dd) (call $hsum_i32 (i32x4.extadd_pairwise_i16x8_s (i16x8.extadd_pairwise_i8x16_s (local.get $q1)))))`,
    `            (local.set $j (i32.add (local.get $j) (i32.const 32)))`,
    `            (br $fl)))`,
    `        (local.set $q (i32.add (local.get $q) (i32.shl (local.get $cols) (i32.const 1))))`,
  ];
  L.push(...bothVariants('        ', i8form, q4form));
  e(`        ;; next token`);
  e(`        (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
  e(`        (br $bl))))`);
  e(``);
  return L;
}

/**
 * Packed q4_k (src/kernels/wasm/pack.ts): 4 rows per group, per sub-block both nibbles of a byte from
 * the same sub-block, so q4_0's trick applies — byte b = lo + 16·hi times x[l] plus hi times
 * x[l+16] − 16·x[l] (the q4 form) is lo·x[l] + hi·x[l+16] with no mask. Per sub-block the 4 rows'
 * integer totals are transposed into one i32x4 and multiplied by the 4 rows' scales, per super-block
 * the mins and the f32 step run once for 4 rows: the same integers and f32 operations as $dot1_q4_k,
 * so packed and row-major weights give the same bits.
 * The relaxed build (wasm/variants.ts) instead masks and shifts the 16 packed bytes of a row into its
 * low and high nibbles (0..15, a valid i7 operand) and takes them against the plain int8 activations
 * with two i16x8.relaxed_dot_i8x16_i7x16_s (16 products each, no widening to i16), adds the two in i16
 * and widens once. Pair sums are at most 2·15·127 and the i16 sum 4·15·127, so no implementation
 * saturates: the sub-block totals, hence the bits, are the baseline's. (Node 20's V8 has no AVX-VNNI
 * path: a relaxed i32x4 dot-add costs pmaddubsw + pmaddwd + paddd, so one pmaddwd per two i16 dots
 * is cheaper than two i32x4 dot-adds.)
 */
function g4q4k(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const byte = (v: string, shift: number) => `(v128.and (i32x4.shr_u ${v} (i32.const ${shift})) ${mask('255')})`;
  const f16x4 = (offset: number) =>
    `(f32x4.mul (v128.and (i32x4.shr_s (i32x4.shl (v128.load16x4_u offset=${offset} (local.get $p)) (i32.const 16)) (i32.const 3)) ${mask('0x8FFFE000')}) (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112))`;
  e(`  (func $g4_q4_k (type $gdot) (param $w i32) (param $cols i32) (param $x i32) (param $out i32) (param $groups i32)`);
  e(`    (local $g i32) (local $p i32) (local $pn i32) (local $j i32) (local $nsb i32) (local $end i32) (local $xq i32) (local $xd i32) (local $xb i32)`);
  e(`    (local $x0 v128) (local $x1 v128) (local $x2 v128) (local $x3 v128) (local $q v128)`);
  e(`    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128) (local $t0 v128) (local $t1 v128)`);
  e(`    (local $sc v128) (local $tot v128) (local $acc v128) (local $macc v128)`);
  L.push(...bothVariants('    ', [`    (local $m v128)`], []));
  e(`    (local.set $nsb (i32.shr_u (local.get $cols) (i32.const 8)))`);
  e(`    (local.set $p (local.get $w))`);
  L.push(...bothVariants('    ', [`    (local.set $m ${mask('0x0f0f0f0f')})`], []));
  e(`    (block $gdone`);
  e(`      (loop $gl`);
  e(`        (br_if $gdone (i32.ge_u (local.get $g) (local.get $groups)))`);
  e(`        (local.set $xd (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))))`);
  e(`        (local.set $xb (i32.add (local.get $xd) (i32.shl (local.get $nsb) (i32.const 2))))`);
  L.push(...bothVariants('        ', [
    `        (local.set $xq (local.get $x))`,
  ], [
    `        (local.set $xq (i32.add (local.get $xd) (i32.mul (local.get $nsb) (i32.const 20))))`,
  ]));
  e(`        (local.set $end (i32.add (local.get $p) (i32.mul (local.get $nsb) (i32.const 576))))`);
  e(`        (local.set $acc (v128.const i32x4 0 0 0 0))`);
  e(`        (local.set $macc (v128.const i32x4 0 0 0 0))`);
  e(`        (block $done`);
  e(`          (loop $l`);
  e(`            (br_if $done (i32.ge_u (local.get $p) (local.get $end)))`);
  e(`            (local.set $tot (v128.const i32x4 0 0 0 0))`);
  e(`            (local.set $pn (i32.add (local.get $p) (i32.const 64)))`);
  for (const half of [0, 1]) {
    e(half === 0 ? `            ;; lane r: row r's scales 0-3, one byte each (taken lowest first)` : `            ;; scales 4-7`);
    if (half === 0) e(`            (local.set $sc (v128.and (v128.load offset=16 (local.get $p)) ${mask('0x3f3f3f3f')}))`);
    else {
      e(`            (local.set $sc (v128.or (v128.and (v128.load offset=48 (local.get $p)) ${mask('0x0f0f0f0f')})`);
      e(`              (i32x4.shl (v128.and (i32x4.shr_u (v128.load offset=16 (local.get $p)) (i32.const 6)) ${mask('0x03030303')}) (i32.const 4))))`);
    }
    e(`            (local.set $j (i32.const 0))`);
    e(`            (block $jdone${half}`);
    e(`              (loop $jl${half}`);
    e(`                (br_if $jdone${half} (i32.ge_u (local.get $j) (i32.const 4)))`);
    const relaxed = [
      `                ;; the plain int8 activations (|q| <= 127) of the sub-block's low and high nibbles`,
      `                (local.set $x0 (i8x16.narrow_i16x8_s (v128.load offset=0 (local.get $xq)) (v128.load offset=16 (local.get $xq))))`,
      `                (local.set $x2 (i8x16.narrow_i16x8_s (v128.load offset=32 (local.get $xq)) (v128.load offset=48 (local.get $xq))))`,
    ];
    for (let r = 0; r < 4; r++) {
      relaxed.push(`                (local.set $q (v128.load offset=${16 * r} (local.get $pn)))`);
      relaxed.push(`                (local.set $s${r} (i32x4.extadd_pairwise_i16x8_s (i16x8.add`);
      relaxed.push(`                  (i16x8.relaxed_dot_i8x16_i7x16_s (local.get $x0) (v128.and (local.get $q) (local.get $m)))`);
      relaxed.push(`                  (i16x8.relaxed_dot_i8x16_i7x16_s (local.get $x2) (v128.and (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $m))))))`);
    }
    const baseline: string[] = [];
    for (let k = 0; k < 4; k++) baseline.push(`                (local.set $x${k} (v128.load offset=${16 * k} (local.get $xq)))`);
    for (let r = 0; r < 4; r++) {
      baseline.push(`                (local.set $q (v128.load8x8_u offset=${16 * r} (local.get $pn)))`);
      baseline.push(`                (local.set $s${r} (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x0)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x2))))`);
      baseline.push(`                (local.set $q (v128.load8x8_u offset=${16 * r + 8} (local.get $pn)))`);
      baseline.push(`                (local.set $s${r} (i32x4.add (local.get $s${r}) (i32x4.add (i32x4.dot_i16x8_s (local.get $q) (local.get $x1)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x3)))))`);
    }
    L.push(...bothVariants('                ', relaxed, baseline));
    e(`                ;; lane r of the transposed sum = row r's sub-block total, times row r's scale`);
    e(`                (local.set $t0 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s0) (local.get $s1))`);
    e(`                                          (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s0) (local.get $s1))))`);
    e(`                (local.set $t1 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s2) (local.get $s3))`);
    e(`                                          (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s2) (local.get $s3))))`);
    e(`                (local.set $tot (i32x4.add (local.get $tot) (i32x4.mul (v128.and (local.get $sc) ${mask('255')})`);
    e(`                  (i32x4.add (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t0) (local.get $t1))`);
    e(`                             (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t0) (local.get $t1))))))`);
    e(`                (local.set $sc (i32x4.shr_u (local.get $sc) (i32.const 8)))`);
    e(`                (local.set $xq (i32.add (local.get $xq) (i32.const 64)))`);
    e(`                (local.set $pn (i32.add (local.get $pn) (i32.const 64)))`);
    e(`                (local.set $j (i32.add (local.get $j) (i32.const 1)))`);
    e(`                (br $jl${half})))`);
  }
  e(`            (local.set $acc (f32x4.add (local.get $acc)`);
  e(`              (f32x4.mul (f32x4.convert_i32x4_s (local.get $tot)) (f32x4.mul ${f16x4(0)} (f32x4.splat (f32.load (local.get $xd)))))))`);
  L.push(...mins('$p', '            '));
  e(`            (local.set $p (i32.add (local.get $p) (i32.const 576)))`);
  e(`            (local.set $xd (i32.add (local.get $xd) (i32.const 4)))`);
  e(`            (local.set $xb (i32.add (local.get $xb) (i32.const 16)))`);
  e(`            (br $l)))`);
  e(`        (v128.store (local.get $out) (f32x4.sub (local.get $acc) (local.get $macc)))`);
  e(`        (local.set $out (i32.add (local.get $out) (i32.const 16)))`);
  e(`        (local.set $g (i32.add (local.get $g) (i32.const 1)))`);
  e(`        (br $gl))))`);
  e(``);
  return L;
}

/**
 * Packed q5_k / q6_k (src/kernels/wasm/pack.ts): per super-block the 4 rows' blocks back to back, each
 * block's bytes as GGUF stores them, so a group is one sequential stream and a prompt batch widens it
 * with the row-major widening at other strides. Per super-block each row's integer total is the 1-row
 * kernel's (the same code, q45Core / q6Core*, on the row's block), the 4 totals are transposed into one
 * i32x4 (integer adds in any order are exact), and the f32 steps (and q5_k's mins, $k5mins_tokens' form)
 * run once for the 4 rows in their lanes: the same integers and f32 operations as $dot1_q5_k /
 * $dot1_q6_k, so packed and row-major weights give the same bits. What it saves against 4 × dot1: the
 * two $hsum_i32 calls per row and super-block (TurboFan neither inlines them nor keeps the caller's
 * vectors in registers across them), the scalar f32 steps, and 3 of 4 mins dot products.
 */
function g4k(f: 5 | 6): string[] {
  const name = `q${f}_k`;
  const bb = f === 5 ? 176 : 210;
  const dAt = f === 5 ? 0 : 208;
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const rs = [0, 1, 2, 3];
  const lanesF = (at: (r: number) => string) =>
    `(f32x4.replace_lane 3 (f32x4.replace_lane 2 (f32x4.replace_lane 1 (f32x4.splat ${at(0)}) ${at(1)}) ${at(2)}) ${at(3)})`;
  const lanesI = (at: (r: number) => string) =>
    `(i32x4.replace_lane 3 (i32x4.replace_lane 2 (i32x4.replace_lane 1 (i32x4.splat ${at(0)}) ${at(1)}) ${at(2)}) ${at(3)})`;
  const b16 = (v: number) => `(v128.const i8x16 ${Array(16).fill(v).join(' ')})`;
  e(`  (func $g4_${name} (type $gdot) (param $w i32) (param $cols i32) (param $x i32) (param $out i32) (param $groups i32)`);
  e(`    (local $g i32) (local $sp i32) (local $p i32) (local $end i32) (local $nsb i32) (local $xq i32) (local $xd i32)`);
  e(`    (local $t v128) (local $t0 v128) (local $t1 v128) (local $acc v128)`);
  if (f === 5) {
    e(`    (local $xb i32) (local $u0 i32) (local $u1 i32) (local $u2 i32) (local $sl i32) (local $sh i32)`);
    e(`    (local $v v128) (local $h v128) (local $a v128) (local $b v128) (local $sc v128) (local $s0 v128) (local $macc v128)`);
    L.push(...bothVariants('    ', [
      `    (local $x8 i32) (local $m15 v128) (local $m16 v128) (local $q i32) (local $xc i32) (local $sc8 i64) (local $h0 v128) (local $h1 v128) (local $v0 v128) (local $v1 v128)`,
      `    (local.set $m15 ${b16(15)})`,
      `    (local.set $m16 ${b16(16)})`,
    ], []));
  } else {
    L.push(...bothVariants('    ', [
      `    (local $xs i32) (local $q v128) (local $h v128) (local $m15 v128) (local $m48 v128) (local $i6 i32) (local $o6 i32) (local $x6 i32) (local $s6 i32)`,
      `    (local.set $m15 ${b16(15)})`,
      `    (local.set $m48 ${b16(48)})`,
    ], [
      `    (local $la v128) (local $lb v128) (local $h v128) (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)`,
    ]));
  }
  e(`    (local.set $nsb (i32.shr_u (local.get $cols) (i32.const 8)))`);
  e(`    (local.set $sp (local.get $w))`);
  e(`    (block $gdone`);
  e(`      (loop $gl`);
  e(`        (br_if $gdone (i32.ge_u (local.get $g) (local.get $groups)))`);
  e(`        (local.set $xd (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))))`);
  if (f === 5) {
    e(`        (local.set $xq (local.get $x))`);
    e(`        (local.set $xb (i32.add (local.get $xd) (i32.shr_u (local.get $cols) (i32.const 6))))`);
    L.push(...bothVariants('        ', [`        (local.set $x8 (i32.add (local.get $xd) (i32.mul (local.get $nsb) (i32.const 20))))`], []));
  } else {
    L.push(...bothVariants('        ', [
      `        (local.set $xq (i32.add (local.get $xd) (i32.mul (local.get $nsb) (i32.const 20))))`,
      `        (local.set $xs (i32.add (local.get $xq) (local.get $cols)))`,
    ], [`        (local.set $xq (local.get $x))`]));
  }
  e(`        (local.set $end (i32.add (local.get $sp) (i32.mul (local.get $nsb) (i32.const ${4 * bb}))))`);
  e(`        (local.set $acc (v128.const i32x4 0 0 0 0))`);
  if (f === 5) e(`        (local.set $macc (v128.const i32x4 0 0 0 0))`);
  e(`        (block $done`);
  e(`          (loop $l`);
  e(`            (br_if $done (i32.ge_u (local.get $sp) (local.get $end)))`);
  const core = f === 5 ? q45Core(true, true) : bothVariants('        ', q6CoreRelaxed(), q6CoreBaseline());
  // the 4 rows in a loop (4 unrolled copies of the row code ran at half the speed: TurboFan spilled)
  e(`        (local.set $p (local.get $sp))`);
  e(`        (local.set $t0 (v128.const i32x4 0 0 0 0))`);
  e(`        (loop $rl`);
  e(`        ;; row (p − sp)/${bb}: its block's integer total, as the 1-row kernel computes it`);
  L.push(...core);
  e(`        ;; its lanes summed into lane 0, shifted into lane 3 of $t0 (the earlier rows move down a lane)`);
  e(`        (local.set $t (i32x4.add (local.get $t) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $t) (local.get $t))))`);
  e(`        (local.set $t (i32x4.add (local.get $t) (i8x16.shuffle 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 (local.get $t) (local.get $t))))`);
  e(`        (local.set $t0 (i8x16.shuffle 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 (local.get $t0) (local.get $t)))`);
  e(`        (local.set $p (i32.add (local.get $p) (i32.const ${bb})))`);
  e(`        (br_if $rl (i32.lt_u (local.get $p) (i32.add (local.get $sp) (i32.const ${4 * bb})))))`);
  e(`        (local.set $t (local.get $t0))`);
  e(`        (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (f32x4.convert_i32x4_s (local.get $t))`);
  e(`          (f32x4.mul ${lanesF((r) => f16At('$sp', bb * r + dAt))} (f32x4.splat (f32.load (local.get $xd)))))))`);
  if (f === 5) {
    e(`        ;; mins of the 4 rows (lane r) against the activations' sub-block sums ($k5mins_tokens)`);
    e(`        (local.set $a ${lanesI((r) => `(i32.load offset=${bb * r + 8} (local.get $sp))`)})`);
    e(`        (local.set $b ${lanesI((r) => `(i32.load offset=${bb * r + 12} (local.get $sp))`)})`);
    L.push(...minsDot(M03q5('$a'), M47q5('$a', '$b'), '        '));
    e(`        (local.set $macc (f32x4.add (local.get $macc) (f32x4.mul (f32x4.convert_i32x4_s (local.get $s0))`);
    e(`          (f32x4.mul ${lanesF((r) => f16At('$sp', bb * r + 2))} (f32x4.splat (f32.load (local.get $xd)))))))`);
    e(`        (local.set $xq (i32.add (local.get $xq) (i32.const 512)))`);
    L.push(...bothVariants('        ', [`        (local.set $x8 (i32.add (local.get $x8) (i32.const 256)))`], []));
    e(`        (local.set $xb (i32.add (local.get $xb) (i32.const 16)))`);
  } else {
    L.push(...bothVariants('        ', [
      `        (local.set $xq (i32.add (local.get $xq) (i32.const 256)))`,
      `        (local.set $xs (i32.add (local.get $xs) (i32.const 32)))`,
    ], [`        (local.set $xq (i32.add (local.get $xq) (i32.const 512)))`]));
  }
  e(`        (local.set $xd (i32.add (local.get $xd) (i32.const 4)))`);
  e(`        (local.set $sp (i32.add (local.get $sp) (i32.const ${4 * bb})))`);
  e(`            (br $l)))`);
  e(`        (v128.store (local.get $out) ${f === 5 ? '(f32x4.sub (local.get $acc) (local.get $macc))' : '(local.get $acc)'})`);
  e(`        (local.set $out (i32.add (local.get $out) (i32.const 16)))`);
  e(`        (local.set $g (i32.add (local.get $g) (i32.const 1)))`);
  e(`        (br $gl))))`);
  e(``);
  return L;
}

/**
 * Packed q4_k prompt batches: each 4-row group is widened once into the token-tile format of wasm/
 * qtiles.ts over whole super-blocks (128 i16x8 vectors of the 4 rows' column pairs, then the 4 rows' d),
 * with the sub-block scale folded into the weights (column l < 16 of a sub-block carries sc·b for the
 * byte b = lo + 16·hi, column l + 16 carries sc·hi: against q4-form activations that is
 * sc·(lo·x[l] + hi·x[l + 16]), |·| <= 255·63), so $ktiles4/8 (tileKernels('k', 128)) compute exactly
 * $g4_q4_k's integer super-block totals and f32 steps; $kmins4 then subtracts the mins as $g4_q4_k does.
 * Activations: the q4 form per super-block in tiles of 4 tokens, then their d_x (backend.ts kTiles).
 */
function ktiles(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  for (const ws of [16, 32]) {
    e(`  ;; One packed q4_k group widened for $ktile${ws / 4}x*: per super-block the 128 column-pair vectors at d + ${ws}k`);
    e(`  ;; (sub-block j's pair k is vector 16j + k), the 4 rows' d at d + ${128 * ws}; super-blocks ${129 * ws} bytes apart.`);
    e(`  (func $kwiden${ws} (param $w i32) (param $nsb i32) (param $d i32)`);
    e(`    (local $sb i32) (local $dw v128) (local $lo v128) (local $hi v128) (local $sc v128) (local $u v128) (local $v v128)`);
    e(`    (local $r0 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128) (local $h0 v128) (local $h1 v128) (local $h2 v128) (local $h3 v128)`);
    e(`    (block $done`);
    e(`      (loop $l`);
    e(`        (br_if $done (i32.ge_u (local.get $sb) (local.get $nsb)))`);
    e(`        (local.set $dw (f32x4.mul (v128.and (i32x4.shr_s (i32x4.shl (v128.load16x4_u (local.get $w)) (i32.const 16)) (i32.const 3)) ${mask('0x8FFFE000')})`);
    e(`          (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112)))`);
    e(`        (local.set $lo (v128.and (v128.load offset=16 (local.get $w)) ${mask('0x3f3f3f3f')}))`);
    e(`        (local.set $hi (v128.or (v128.and (v128.load offset=48 (local.get $w)) ${mask('0x0f0f0f0f')})`);
    e(`          (i32x4.shl (v128.and (i32x4.shr_u (v128.load offset=16 (local.get $w)) (i32.const 6)) ${mask('0x03030303')}) (i32.const 4))))`);
    for (let j = 0; j < 8; j++) {
      e(`        ;; sub-block ${j}: row r's scale in both i16 lanes of its i32 lane`);
      e(`        (local.set $sc (v128.and (i32x4.shr_u (local.get $${j < 4 ? 'lo' : 'hi'}) (i32.const ${8 * (j % 4)})) ${mask('255')}))`);
      e(`        (local.set $sc (v128.or (local.get $sc) (i32x4.shl (local.get $sc) (i32.const 16))))`);
      const baseline: string[] = [];
      for (let r = 0; r < 4; r++) baseline.push(`        (local.set $r${r} (v128.load offset=${64 + 64 * j + 16 * r} (local.get $w)))`);
      for (let r = 0; r < 4; r++) baseline.push(`        (local.set $h${r} (i8x16.shr_u (local.get $r${r}) (i32.const 4)))`);
      baseline.push(
        ...interleaveRows4('        ', (k, bytes) =>
          (['low', 'high'] as const).map((side, dk) => `        (v128.store offset=${ws * (16 * j + k + dk)} (local.get $d) (i16x8.mul (i16x8.extend_${side}_i8x16_u ${bytes}) (local.get $sc)))`),
        ),
      );
      L.push(...bothVariants('        ', relaxedKWidenSubblock(ws, j), baseline));
    }
    L.push(...bothVariants('        ', [`        (v128.store offset=${72 * ws} (local.get $d) (local.get $dw))`], [`        (v128.store offset=${128 * ws} (local.get $d) (local.get $dw))`]));
    e(`        (local.set $d (i32.add (local.get $d) (i32.const ${129 * ws})))`);
    e(`        (local.set $w (i32.add (local.get $w) (i32.const 576)))`);
    e(`        (local.set $sb (i32.add (local.get $sb) (i32.const 1)))`);
    e(`        (br $l))))`);
    e(``);
  }
  e(`  ;; out[0..3] −= the 4 rows' super-block mins for one token (x: its K activations), as $g4_q4_k.`);
  e(`  (func $kmins4 (param $w i32) (param $nsb i32) (param $x i32) (param $out i32)`);
  e(`    (local $sb i32) (local $xd i32) (local $xb i32) (local $sc v128) (local $s0 v128) (local $macc v128) (local $t0 v128) (local $t1 v128)`);
  e(`    (local.set $xd (i32.add (local.get $x) (i32.shl (local.get $nsb) (i32.const 9))))`);
  e(`    (local.set $xb (i32.add (local.get $xd) (i32.shl (local.get $nsb) (i32.const 2))))`);
  e(`    (block $done`);
  e(`      (loop $l`);
  e(`        (br_if $done (i32.ge_u (local.get $sb) (local.get $nsb)))`);
  L.push(...mins('$w', '        '));
  e(`        (local.set $w (i32.add (local.get $w) (i32.const 576)))`);
  e(`        (local.set $xd (i32.add (local.get $xd) (i32.const 4)))`);
  e(`        (local.set $xb (i32.add (local.get $xb) (i32.const 16)))`);
  e(`        (local.set $sb (i32.add (local.get $sb) (i32.const 1)))`);
  e(`        (br $l)))`);
  e(`    (v128.store (local.get $out) (f32x4.sub (v128.load (local.get $out)) (local.get $macc))))`);
  e(``);
  e(`  ;; $kmins4 for 4 tokens at once (x: K activations, xs apart; out: outputs, os apart): the rows' mins`);
  e(`  ;; widened and dmin converted once per super-block for the 4 tokens; each token's own $kmins4 steps.`);
  e(`  ;; The masks are locals (V8 rebuilds a v128.const at each use, 3 instructions) and each token's 8 sums`);
  e(`  ;; are one load, split into their two 64-bit halves by shuffles: with 16 splat loads TurboFan hoisted`);
  e(`  ;; them all to the top of the super-block and spilled them.`);
  e(`  (func $kmins4x4 (param $w i32) (param $nsb i32) (param $x i32) (param $xs i32) (param $out i32) (param $os i32)`);
  e(`    (local $sb i32) (local $xd i32) (local $xb i32) (local $o1 i32) (local $o2 i32) (local $o3 i32)`);
  e(`    (local $e0 v128) (local $e1 v128) (local $e2 v128) (local $e3 v128) (local $dm v128) (local $s0 v128) (local $t1 v128) (local $xv v128)`);
  e(`    (local $m0 v128) (local $m1 v128) (local $m2 v128) (local $m3 v128)`);
  e(`    (local $k3f v128) (local $k0f v128) (local $k03 v128) (local $kfh v128) (local $k112 v128)`);
  e(`    (local.set $k3f ${mask('0x3f3f3f3f')})`);
  e(`    (local.set $k0f ${mask('0x0f0f0f0f')})`);
  e(`    (local.set $k03 ${mask('0x03030303')})`);
  e(`    (local.set $kfh ${mask('0x8FFFE000')})`);
  e(`    (local.set $k112 (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112))`);
  e(`    (local.set $xd (i32.add (local.get $x) (i32.shl (local.get $nsb) (i32.const 9))))`);
  e(`    (local.set $xb (i32.add (local.get $xd) (i32.shl (local.get $nsb) (i32.const 2))))`);
  e(`    (local.set $o1 (local.get $xs))`);
  e(`    (local.set $o2 (i32.shl (local.get $xs) (i32.const 1)))`);
  e(`    (local.set $o3 (i32.add (local.get $o2) (local.get $xs)))`);
  e(`    (block $done`);
  e(`      (loop $l`);
  e(`        (br_if $done (i32.ge_u (local.get $sb) (local.get $nsb)))`);
  e(`        (local.set $s0 (v128.and (v128.load offset=32 (local.get $w)) (local.get $k3f)))`);
  e(`        (local.set $e0 (i16x8.extend_low_i8x16_u (local.get $s0)))`);
  e(`        (local.set $e1 (i16x8.extend_high_i8x16_u (local.get $s0)))`);
  e(`        (local.set $s0 (v128.or (v128.and (i32x4.shr_u (v128.load offset=48 (local.get $w)) (i32.const 4)) (local.get $k0f))`);
  e(`          (i32x4.shl (v128.and (i32x4.shr_u (v128.load offset=32 (local.get $w)) (i32.const 6)) (local.get $k03)) (i32.const 4))))`);
  e(`        (local.set $e2 (i16x8.extend_low_i8x16_u (local.get $s0)))`);
  e(`        (local.set $e3 (i16x8.extend_high_i8x16_u (local.get $s0)))`);
  e(`        (local.set $dm (f32x4.mul (v128.and (i32x4.shr_s (i32x4.shl (v128.load16x4_u offset=8 (local.get $w)) (i32.const 16)) (i32.const 3)) (local.get $kfh)) (local.get $k112)))`);
  for (let k = 0; k < 4; k++) {
    const at = (v: string) => (k === 0 ? `(local.get ${v})` : `(i32.add (local.get ${v}) (local.get $o${k}))`);
    const x03 = `(i8x16.shuffle 0 1 2 3 4 5 6 7 0 1 2 3 4 5 6 7 (local.get $xv) (local.get $xv))`;
    const x47 = `(i8x16.shuffle 8 9 10 11 12 13 14 15 8 9 10 11 12 13 14 15 (local.get $xv) (local.get $xv))`;
    e(`        ;; token ${k}`);
    e(`        (local.set $xv (v128.load ${at('$xb')}))`);
    e(`        (local.set $s0 (i32x4.add (i32x4.dot_i16x8_s (local.get $e0) ${x03}) (i32x4.dot_i16x8_s (local.get $e2) ${x47})))`);
    e(`        (local.set $t1 (i32x4.add (i32x4.dot_i16x8_s (local.get $e1) ${x03}) (i32x4.dot_i16x8_s (local.get $e3) ${x47})))`);
    e(`        (local.set $s0 (i32x4.add (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $s0) (local.get $t1))`);
    e(`                                  (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $s0) (local.get $t1))))`);
    e(`        (local.set $m${k} (f32x4.add (local.get $m${k})`);
    e(`          (f32x4.mul (f32x4.convert_i32x4_s (local.get $s0)) (f32x4.mul (local.get $dm) (f32x4.splat (f32.load ${at('$xd')}))))))`);
  }
  e(`        (local.set $w (i32.add (local.get $w) (i32.const 576)))`);
  e(`        (local.set $xd (i32.add (local.get $xd) (i32.const 4)))`);
  e(`        (local.set $xb (i32.add (local.get $xb) (i32.const 16)))`);
  e(`        (local.set $sb (i32.add (local.get $sb) (i32.const 1)))`);
  e(`        (br $l)))`);
  for (let k = 0; k < 4; k++) {
    const o = k === 0 ? '(local.get $out)' : `(i32.add (local.get $out) (i32.mul (local.get $os) (i32.const ${k})))`;
    e(`    (v128.store ${o} (f32x4.sub (v128.load ${o}) (local.get $m${k})))`);
  }
  e(`  )`);
  e(``);
  e(`  ;; The mins for each of n tokens: 4 at a time ($kmins4x4), then one at a time ($kmins4).`);
  e(`  (func $kmins_tokens (param $w i32) (param $nsb i32) (param $x i32) (param $xs i32) (param $out i32) (param $os i32) (param $n i32)`);
  e(`    (local $b i32)`);
  e(`    (block $done4`);
  e(`      (loop $l4`);
  e(`        (br_if $done4 (i32.gt_u (i32.add (local.get $b) (i32.const 4)) (local.get $n)))`);
  e(`        (call $kmins4x4 (local.get $w) (local.get $nsb) (local.get $x) (local.get $xs) (local.get $out) (local.get $os))`);
  e(`        (local.set $x (i32.add (local.get $x) (i32.shl (local.get $xs) (i32.const 2))))`);
  e(`        (local.set $out (i32.add (local.get $out) (i32.shl (local.get $os) (i32.const 2))))`);
  e(`        (local.set $b (i32.add (local.get $b) (i32.const 4)))`);
  e(`        (br $l4)))`);
  e(`    (block $done`);
  e(`      (loop $l`);
  e(`        (br_if $done (i32.ge_u (local.get $b) (local.get $n)))`);
  e(`        (call $kmins4 (local.get $w) (local.get $nsb) (local.get $x) (local.get $out))`);
  e(`        (local.set $x (i32.add (local.get $x) (local.get $xs)))`);
  e(`        (local.set $out (i32.add (local.get $out) (local.get $os)))`);
  e(`        (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
  e(`        (br $l))))`);
  e(``);
  return L;
}

/**
 * The relaxed build's packed q4_k prompt batches (wasm/variants.ts), as its q4_0 ones (qtiles.ts): per
 * super-block and sub-block j of a widened group (ws = 16 per 4-row group), 8 vectors of the nibbles
 * themselves (vector k: columns 4k..4k+3 of the 4 rows, row r in i32 lane r) at 9·ws·j + ws·k, then the
 * 4 rows' sub-block scales (row r's in i16 lanes 2r, 2r+1) at 9·ws·j + 8·ws; the 4 rows' d at 72·ws;
 * super-blocks stay 129·ws apart. Activations (backend.ts kTilesRelaxed) per super-block and tile of t
 * tokens: per sub-block, for k < 8 each token's x[4k..4k+3] as int8 in one i32; then each token's d_x.
 * Per sub-block 8 i16x8.relaxed_dot_i8x16_i7x16_s (at most 8·2·15·127 < 2^15 per i16 lane), then one
 * i32x4.dot_i16x8_s with the scales: sc·(sub-block total) per row, exactly. The super-block's exact
 * total then takes the baseline's f32 step ($ktile*), and $kmins_tokens subtracts the mins as before.
 */
function relaxedKWidenSubblock(ws: number, j: number): string[] {
  return [
    ...nibbleQuads('        ', (r) => 64 + 64 * j + 16 * r, (k) => ws * (9 * j + k)),
    `        (v128.store offset=${ws * (9 * j + 8)} (local.get $d) (local.get $sc))`,
  ];
}

/** The relaxed q4_k tile kernels $krtile{4,8}x{1..T} and their drivers $krtiles{4,8} (see relaxedKWidenSubblock). */
function relaxedKTiles(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  for (const G of [1, 2] as const) {
    const ws = 16 * G;
    for (let t = 1; t <= T; t++) {
      const { gs, toks, acc } = tileShape(G, t);
      L.push(...relaxedTileHead(`krtile${4 * G}x${t}`, G, t, ['j'], ['a', 'i', 'f']));
      for (const a of acc) e(`        (local.set $i${a} (v128.const i32x4 0 0 0 0))`);
      e(`        (local.set $j (i32.const 0))`);
      e(`        (loop $jl`);
      for (const a of acc) e(`          (local.set $a${a} (v128.const i32x4 0 0 0 0))`);
      L.push(...relaxedKLoop('          ', G, t));
      e(`          ;; times the sub-block's scales, widened to the rows' i32 lanes`);
      for (const g of gs) e(`          (local.set $w${g} (v128.load offset=${16 * g} (local.get $s)))`);
      for (const g of gs) for (const i of toks) e(`          (local.set $i${g}${i} (i32x4.add (local.get $i${g}${i}) (i32x4.dot_i16x8_s (local.get $a${g}${i}) (local.get $w${g}))))`);
      e(`          (local.set $s (i32.add (local.get $s) (i32.const ${ws})))`);
      e(`          (local.set $j (i32.add (local.get $j) (i32.const 1)))`);
      e(`          (br_if $jl (i32.lt_u (local.get $j) (i32.const 8))))`);
      for (const g of gs) e(`        (local.set $dw${g} (v128.load offset=${16 * g} (local.get $s)))`);
      for (const i of toks) {
        e(`        (local.set $dx (f32x4.splat (f32.load offset=${4 * i} (local.get $x))))`);
        for (const g of gs) {
          e(`        (local.set $f${g}${i} (f32x4.add (local.get $f${g}${i})`);
          e(`          (f32x4.mul (f32x4.convert_i32x4_s (local.get $i${g}${i})) (f32x4.mul (local.get $dw${g}) (local.get $dx)))))`);
        }
      }
      L.push(...relaxedTileEnd(G, t, 57 * ws, 4 * t));
    }
    L.push(...relaxedTileDriver(`krtiles${4 * G}`, `krtile${4 * G}`, 260));
  }
  return L;
}

/**
 * $s0 = Σ_j m_j·Σx_j per row lane, the 4 rows' mins m0-3 / m4-7 as bytes in their i32 lanes ($m03 / $m47
 * expressions) against the activations' 8 i16 sub-block sums at $xb: each half widened to i16 (row r's
 * bytes in i32 lanes 2r', 2r'+1 of the low or high half) and one i32x4.dot_i16x8_s with the sums' pairs
 * (B_j, B_j+1) splat from 8 bytes, then each row's two lanes added. Exact integers (m ≤ 63, |B| ≤ 4064):
 * the same sums as 8 lane-wise multiply-adds, in 4 dots instead of 8 splats, shifts, masks, multiplies.
 * Uses $t0 / $t1.
 */
function minsDot(m03: string, m47: string, ind: string): string[] {
  const x03 = `(v128.load64_splat offset=0 (local.get $xb))`;
  const x47 = `(v128.load64_splat offset=8 (local.get $xb))`;
  return [
    `${ind}(local.set $t0 ${m03})`,
    `${ind}(local.set $t1 ${m47})`,
    `${ind}(local.set $s0 (i32x4.add (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_u (local.get $t0)) ${x03}) (i32x4.dot_i16x8_s (i16x8.extend_low_i8x16_u (local.get $t1)) ${x47})))`,
    `${ind}(local.set $t1 (i32x4.add (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_u (local.get $t0)) ${x03}) (i32x4.dot_i16x8_s (i16x8.extend_high_i8x16_u (local.get $t1)) ${x47})))`,
    `${ind}(local.set $s0 (i32x4.add (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $s0) (local.get $t1))`,
    `${ind}                         (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $s0) (local.get $t1))))`,
  ];
}

/** The super-block mins of 4 packed q4_k rows at `ptr` added to $macc (lane r): $g4_q4_k's and $kmins4's one code. */
/** q5_k: the 4 rows' mins m0-3 / m4-7 as bytes in their i32 lanes, from their scale words 1 and 2 gathered in $u1 / $u2. */
const M03q5 = (u1: string) => `(v128.and (local.get ${u1}) ${mask('0x3f3f3f3f')})`;
const M47q5 = (u1: string, u2: string) =>
  `(v128.or (v128.and (i32x4.shr_u (local.get ${u2}) (i32.const 4)) ${mask('0x0f0f0f0f')}) (i32x4.shl (v128.and (i32x4.shr_u (local.get ${u1}) (i32.const 6)) ${mask('0x03030303')}) (i32.const 4)))`;

/** Packed q4_k: the 4 rows' mins m0-3 / m4-7 as bytes in their i32 lanes (lane r: row r's), from the scale words at `ptr`. */
const M03 = (ptr: string) => `(v128.and (v128.load offset=32 (local.get ${ptr})) ${mask('0x3f3f3f3f')})`;
const M47 = (ptr: string, ind: string) =>
  `(v128.or (v128.and (i32x4.shr_u (v128.load offset=48 (local.get ${ptr})) (i32.const 4)) ${mask('0x0f0f0f0f')})\n${ind}  (i32x4.shl (v128.and (i32x4.shr_u (v128.load offset=32 (local.get ${ptr})) (i32.const 6)) ${mask('0x03030303')}) (i32.const 4)))`;

function mins(ptr: string, ind: string): string[] {
  const L: string[] = [];
  L.push(`${ind};; mins of the 4 rows (lane r) against the activations' sub-block sums`);
  L.push(...minsDot(M03(ptr), M47(ptr, ind), ind));
  L.push(`${ind}(local.set $macc (f32x4.add (local.get $macc)`);
  L.push(`${ind}  (f32x4.mul (f32x4.convert_i32x4_s (local.get $s0)) (f32x4.mul ${f16x4At(8, ptr)} (f32x4.splat (f32.load (local.get $xd)))))))`);
  return L;
}

/**
 * q6_k prompt batches (row-major weights, 2+ tokens): 4 rows at a time widened once per thread into the
 * baseline token-tile layout of packed q4_k ($kwiden: per super-block 128 i16x8 vectors of the 4 rows'
 * column pairs at d + ws·k, the rows' d at d + 128·ws, super-blocks 129·ws apart), each value already
 * times its sub-block's scale: sc·(q − 32), |·| <= 4096. Against the plain Q8_K activations in pairs
 * (backend.ts kTiles), $ktiles8/4 then sum exactly $dot1_q6_k's integer super-block totals and take
 * its f32 step, so a prompt batch gives each token the 1-token bits, in both builds. Per run of 8
 * columns (n, h) and group k, each row's 8 values are built as $dot1_q6_k's baseline builds them; the
 * 4 rows' i16x8 are then transposed as 4×4 i32 (column pairs) with shuffles.
 */
function k6widen(ws: number): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const rs = [0, 1, 2, 3];
  L.push(...widenHead(`k6widen${ws}`, '(local $m i32) (local $a i32) (local $hq i32) (local $sc i32)'));
  e(`        (local.set $m (i32.const 0))`);
  e(`        (loop $ml`);
  e(`          ;; run m: half n = m >> 2, l = 8·(m & 3) .. + 7 of each group k`);
  e(`          (local.set $a (i32.add (i32.shl (i32.shr_u (local.get $m) (i32.const 2)) (i32.const 6)) (i32.shl (i32.and (local.get $m) (i32.const 3)) (i32.const 3))))`);
  e(`          (local.set $hq (i32.add (i32.shl (i32.shr_u (local.get $m) (i32.const 2)) (i32.const 5)) (i32.shl (i32.and (local.get $m) (i32.const 3)) (i32.const 3))))`);
  e(`          (local.set $sc (i32.add (i32.shl (i32.shr_u (local.get $m) (i32.const 2)) (i32.const 3)) (i32.shr_u (i32.and (local.get $m) (i32.const 3)) (i32.const 1))))`);
  e(`          ;; the run's first column pair: 64n + 4·(m & 3)`);
  e(`          (local.set $o (i32.add (local.get $d) (i32.mul (i32.add (i32.shl (i32.shr_u (local.get $m) (i32.const 2)) (i32.const 6)) (i32.shl (i32.and (local.get $m) (i32.const 3)) (i32.const 2))) (i32.const ${ws}))))`);
  for (let k = 0; k < 4; k++) {
    for (const r of rs) {
      const pa = `(i32.add (local.get $p${r}) (local.get $a))`;
      const q = q6Groups(`(v128.load8x8_u ${pa})`, `(v128.load8x8_u offset=32 ${pa})`, `(v128.load8x8_u offset=128 (i32.add (local.get $p${r}) (local.get $hq)))`)[k];
      e(`          (local.set $r${r} (i16x8.mul (i16x8.sub ${q} ${i16(32)})`);
      e(`            (i16x8.splat (i32.load8_s offset=${192 + 2 * k} (i32.add (local.get $p${r}) (local.get $sc))))))`);
    }
    L.push(...transposeStore4(ws, 16 * k, '          '));
  }
  e(`          (local.set $m (i32.add (local.get $m) (i32.const 1)))`);
  e(`          (br_if $ml (i32.lt_u (local.get $m) (i32.const 8))))`);
  L.push(...widenNext(ws, 208));
  return L;
}

/**
 * q5_k prompt batches likewise: 4 row-major rows widened into the same layout with sc·q (q the 5-bit
 * value, |·| <= 63·31; run c's low nibbles are sub-block 2c, columns 64c..64c+31, its high ones 2c+1),
 * the rows' d after them; $ktiles8/4 then give the 1-token kernel's s, and $k5mins_tokens subtracts its
 * m (the same super-block steps), so a batch gives the 1-token bits.
 */
function k5widen(ws: number): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const rs = [0, 1, 2, 3];
  const bit = (k: number, h: string) => (k <= 4 ? `(i16x8.shl ${h} (i32.const ${4 - k}))` : `(i16x8.shr_u ${h} (i32.const ${k - 4}))`);
  L.push(...widenHead(`k5widen${ws}`, '(local $h8 i32) (local $u0 i32) (local $u2 i32)'));
  e(`        (local.set $h8 (i32.const 0))`);
  e(`        (loop $hl`);
  e(`          ;; columns 64c + h8 .. + 7 (low nibbles) and 64c + 32 + h8 .. + 7 (high), pairs from (64c + h8) / 2`);
  e(`          (local.set $o (i32.add (local.get $d) (i32.mul (i32.shr_u (local.get $h8) (i32.const 1)) (i32.const ${ws}))))`);
  for (let c = 0; c < 4; c++) {
    for (const side of [0, 1]) {
      const j = 2 * c + side;
      for (const r of rs) {
        const v = `(v128.load8x8_u offset=${48 + 32 * c} (i32.add (local.get $p${r}) (local.get $h8)))`;
        const qh = `(v128.load8x8_u offset=16 (i32.add (local.get $p${r}) (local.get $h8)))`;
        const nib = side ? `(i16x8.shr_u ${v} (i32.const 4))` : `(v128.and ${v} ${i16(15)})`;
        e(`          (local.set $u0 (i32.load offset=4 (local.get $p${r})))`);
        if (j >= 4) e(`          (local.set $u2 (i32.load offset=12 (local.get $p${r})))`);
        const sc = j < 4
          ? `(i32.and (i32.shr_u (local.get $u0) (i32.const ${8 * j})) (i32.const 63))`
          : `(i32.or (i32.and (i32.shr_u (local.get $u2) (i32.const ${8 * (j - 4)})) (i32.const 15)) (i32.shl (i32.and (i32.shr_u (local.get $u0) (i32.const ${8 * (j - 4) + 6})) (i32.const 3)) (i32.const 4)))`;
        e(`          (local.set $r${r} (i16x8.mul (v128.or ${nib} (v128.and ${bit(j, qh)} ${i16(16)})) (i16x8.splat ${sc})))`);
      }
      L.push(...transposeStore4(ws, 32 * c + 16 * side, '          '));
    }
  }
  e(`          (local.set $h8 (i32.add (local.get $h8) (i32.const 8)))`);
  e(`          (br_if $hl (i32.lt_u (local.get $h8) (i32.const 32))))`);
  L.push(...widenNext(ws, 0));
  return L;
}

/**
 * The start of a K-quant widening function (w: 4 rows rb apart, their super-blocks sbs apart — row-major
 * or packed q5_k/q6_k —, nsb super-blocks, d: the widened group): up to its super-block loop.
 */
function widenHead(name: string, locals: string): string[] {
  const rs = [0, 1, 2, 3];
  return [
    `  (func $${name} (param $w i32) (param $rb i32) (param $sbs i32) (param $nsb i32) (param $d i32)`,
    `    (local $sb i32) (local $o i32) ${locals}${rs.map((r) => ` (local $p${r} i32) (local $r${r} v128)`).join('')}`,
    `    (local $t0 v128) (local $t1 v128) (local $t2 v128) (local $t3 v128)`,
    `    (local.set $p0 (local.get $w))`,
    ...rs.slice(1).map((r) => `    (local.set $p${r} (i32.add (local.get $p${r - 1}) (local.get $rb)))`),
    `    (block $done`,
    `      (loop $l`,
    `        (br_if $done (i32.ge_u (local.get $sb) (local.get $nsb)))`,
  ];
}

/**
 * The end of a K-quant widening super-block: the 4 rows' d (f16 at `dAt` of each row's block) stored
 * after the column pairs, then the next super-block ($sbs bytes on: a row-major row's block, or a packed
 * group's 4 blocks).
 */
function widenNext(ws: number, dAt: number): string[] {
  return [
    `        ;; the 4 rows' d`,
    `        (v128.store offset=${128 * ws} (local.get $d) (f32x4.replace_lane 3 (f32x4.replace_lane 2 (f32x4.replace_lane 1`,
    `          (f32x4.splat ${f16At('$p0', dAt)}) ${f16At('$p1', dAt)}) ${f16At('$p2', dAt)}) ${f16At('$p3', dAt)}))`,
    ...[0, 1, 2, 3].map((r) => `        (local.set $p${r} (i32.add (local.get $p${r}) (local.get $sbs)))`),
    `        (local.set $d (i32.add (local.get $d) (i32.const ${129 * ws})))`,
    `        (local.set $sb (i32.add (local.get $sb) (i32.const 1)))`,
    `        (br $l))))`,
    ``,
  ];
}

/**
 * $k5mins_tokens: the q5_k mins of 4 row-major rows taken off a batch's tile outputs, the 4 rows in the
 * i32 lanes as $kmins4 does for packed q4_k (their scale words gathered per super-block): per lane the
 * integer Σ m_j·Σx_j, f32, times dmin·d_x, summed in super-block order, then out − m: $dot1_q5_k's steps.
 */
function k5mins(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const lanes = (at: (r: number) => string) =>
    `(i32x4.replace_lane 3 (i32x4.replace_lane 2 (i32x4.replace_lane 1 (i32x4.splat ${at(0)}) ${at(1)}) ${at(2)}) ${at(3)})`;
  e(`  ;; out[r] −= row r's q5_k mins (rows w + r·rb, r < 4) for each of n tokens (K activations x, xs apart;`);
  e(`  ;; outputs os apart).`);
  e(`  (func $k5mins_tokens (param $w i32) (param $rb i32) (param $sbs i32) (param $nsb i32) (param $x i32) (param $xs i32) (param $out i32) (param $os i32) (param $n i32)`);
  e(`    (local $b i32) (local $sb i32) (local $xd i32) (local $xb i32) (local $p0 i32) (local $p1 i32) (local $p2 i32) (local $p3 i32)`);
  e(`    (local $u1 v128) (local $u2 v128) (local $sc v128) (local $s0 v128) (local $macc v128) (local $t0 v128) (local $t1 v128)`);
  e(`    (block $bdone`);
  e(`      (loop $bl`);
  e(`        (br_if $bdone (i32.ge_u (local.get $b) (local.get $n)))`);
  e(`        (local.set $p0 (local.get $w))`);
  for (const r of [1, 2, 3]) e(`        (local.set $p${r} (i32.add (local.get $p${r - 1}) (local.get $rb)))`);
  e(`        (local.set $xd (i32.add (local.get $x) (i32.shl (local.get $nsb) (i32.const 9))))`);
  e(`        (local.set $xb (i32.add (local.get $xd) (i32.shl (local.get $nsb) (i32.const 2))))`);
  e(`        (local.set $macc (v128.const i32x4 0 0 0 0))`);
  e(`        (local.set $sb (i32.const 0))`);
  e(`        (block $sdone`);
  e(`          (loop $sl`);
  e(`            (br_if $sdone (i32.ge_u (local.get $sb) (local.get $nsb)))`);
  e(`            (local.set $u1 ${lanes((r) => `(i32.load offset=8 (local.get $p${r}))`)})`);
  e(`            (local.set $u2 ${lanes((r) => `(i32.load offset=12 (local.get $p${r}))`)})`);
  L.push(...minsDot(M03q5('$u1'), M47q5('$u1', '$u2'), '            '));
  e(`            (local.set $macc (f32x4.add (local.get $macc) (f32x4.mul (f32x4.convert_i32x4_s (local.get $s0))`);
  e(`              (f32x4.mul (f32x4.replace_lane 3 (f32x4.replace_lane 2 (f32x4.replace_lane 1 (f32x4.splat ${f16At('$p0', 2)}) ${f16At('$p1', 2)}) ${f16At('$p2', 2)}) ${f16At('$p3', 2)})`);
  e(`                (f32x4.splat (f32.load (local.get $xd)))))))`);
  for (const r of [0, 1, 2, 3]) e(`            (local.set $p${r} (i32.add (local.get $p${r}) (local.get $sbs)))`);
  e(`            (local.set $xd (i32.add (local.get $xd) (i32.const 4)))`);
  e(`            (local.set $xb (i32.add (local.get $xb) (i32.const 16)))`);
  e(`            (local.set $sb (i32.add (local.get $sb) (i32.const 1)))`);
  e(`            (br $sl)))`);
  e(`        (v128.store (local.get $out) (f32x4.sub (v128.load (local.get $out)) (local.get $macc)))`);
  e(`        (local.set $x (i32.add (local.get $x) (local.get $xs)))`);
  e(`        (local.set $out (i32.add (local.get $out) (local.get $os)))`);
  e(`        (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
  e(`        (br $bl))))`);
  e(``);
  return L;
}

/** A K-quant super-block's f16 d (q6_k: at 208 of the block at `ptr`; q5_k: at 0) as f32, through the table. */
const f16At = (ptr: string, at = 208) => `(f32.load offset=4096 (i32.shl (i32.load16_u offset=${at} (local.get ${ptr})) (i32.const 2)))`;

/**
 * q5_k / q6_k prompt batches of rows [r0, r1): 8 rows at a time (two widened groups side by side), then 4;
 * q5_k's mins taken off per group and token after its tiles. Returns the first row left (the rows%4 tail
 * runs the 1-token kernels per token in $rows).
 */
function rowsK(f: 5 | 6, packed = false): string[] {
  const nsb = '(i32.shr_u (local.get $cols) (i32.const 8))';
  const outAt = (r: string) => `(i32.add (local.get $out) (i32.shl ${r} (i32.const 2)))`;
  const bb = f === 5 ? 176 : 210;
  // a group's rows and super-blocks: row-major rows rb apart, blocks bb apart; packed blocks of the 4 rows back to back
  const strides = packed ? `(i32.const ${bb}) (i32.const ${4 * bb})` : `(local.get $rb) (i32.const ${bb})`;
  return tiledRowsDriver({
    name: `rows_k${f}${packed ? 'p' : ''}`,
    comment: `${packed ? 'packed ' : ''}q${f}_k prompt batches (kernel ${f === 5 ? (packed ? 57 : 30) : packed ? 59 : 32}, 2+ tokens) of rows [r0, r1); the tile activations' address is at 208.`,
    widen: (ws, w, d) => `(call $k${f}widen${ws} ${w} ${strides} ${nsb} ${d})`,
    tiles: (rows) =>
      `(call $ktiles${rows} (local.get $scr) ${nsb} (i32.load offset=208 (i32.const 0)) ${outAt('(local.get $r)')} (i32.shl (local.get $rows) (i32.const 2)) (local.get $n))`,
    after:
      f === 5
        ? (wr, r) => [`        (call $k5mins_tokens ${wr} ${strides} ${nsb} (local.get $x) (local.get $xs) ${outAt(r)} (i32.shl (local.get $rows) (i32.const 2)) (local.get $n))`]
        : undefined,
  });
}

/** 4 f16 at `ptr` + offset widened exactly to f32 (bits of d·2^-112, times 2^112). */
const f16x4At = (offset: number, ptr: string) =>
  `(f32x4.mul (v128.and (i32x4.shr_s (i32x4.shl (v128.load16x4_u offset=${offset} (local.get ${ptr})) (i32.const 16)) (i32.const 3)) (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000)) (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112))`;

export function kquantSection(): string {
  return HEADER + [...q45(false), ...q45(true), ...q6(), ...dot4('q4_k'), ...dot4('q5_k'), ...dot4('q6_k'), ...g4q4k(), ...g4k(5), ...g4k(6), ...ktiles(), ...tileKernels('k', 128), ...bothVariants('  ', relaxedKTiles(), []), ...k6widen(16), ...k6widen(32), ...k5widen(16), ...k5widen(32), ...k5mins(), ...rowsK(5), ...rowsK(6), ...rowsK(5, true), ...rowsK(6, true), ...quantQ8k()].join('\n');
}

export const KQUANT_SECTION: Section = { name: 'kquant', script: 'kquants.ts', text: kquantSection };

export const withKquantSection = (wat: string) => withGenerated(wat, KQUANT_SECTION);

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) runGenerator(KQUANT_SECTION, process.argv);
