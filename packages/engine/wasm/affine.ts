/**
 * Writes the MLX affine section of kernels.wat (between the `>>> affine` / `<<< affine` markers): dot
 * kernels for packed MLX weights (src/quant/mlx.ts: per row the packed bits, then (scale, bias) per
 * group) at 2, 3, 4, 6 and 8 bits, and their activation preparation. The five differ only in how a
 * chunk of packed bytes becomes 4 lanes of integers, so they are generated:
 * `pnpm exec tsx packages/engine/wasm/affine.ts` (`--check` compares), then rebuild kernels.wasm.
 */
import { fileURLToPath } from 'node:url';
import { mlxTiles, scaleBias4 } from './mlxtiles.js';
import { type Section, runGenerator, withGenerated } from './sections.js';

const HEADER = `  ;; ---------------------------------------------------------------- MLX affine (mlx<bits>_g<group>_<scale>)
  ;; w = scale·q + bias per group, activations kept in f32 as MLX computes in floats (no 8-bit rounding):
  ;;   dot = Σ_groups scale·(Σ q·x) + bias·(Σ x)
  ;; A chunk of packed bytes is spread over 4 i32 lanes, each holding E consecutive elements (E = 8 for
  ;; 3 and 4 bits, 4 for 2, 6 and 8 bits); shift/mask k of the lanes gives elements k, E + k, 2E + k,
  ;; 3E + k, converted to f32 and multiplied by the activations prepared in that order (prep_affine: per
  ;; 4E columns, vector k holds x[E·i + k] in lane i; then per token one f32 sum of x per group). Per group
  ;; the 4-lane sum is scaled (splat) into the row's vector sum and bias·Σx joins a scalar sum; the row is
  ;; their sum. Within (cols + 16)·2^-23·Σ(|scale·q·x| + |bias·x|) of the exact product (tests).
  ;; The group size and the scale dtype (0 f16, 1 bf16, 2 f32) of the current weight are at 212 and 216.
  ;; A chunk load may read up to 4 bytes past the chunk: still inside the row (its scales follow).
`;

interface Bits {
  bits: 2 | 3 | 4 | 6 | 8;
  /** Elements per lane. */
  e: 4 | 8;
  /** Packed bytes per chunk of 4·e elements. */
  bytes: number;
  /** The chunk's bytes at $p spread to 4 lanes (lane i: elements e·i .. e·i + e − 1, lowest bits first). */
  load: string;
}

const ZERO = '(v128.const i32x4 0 0 0 0)';
const TRIPLES = `(i8x16.shuffle 0 1 2 16 3 4 5 16 6 7 8 16 9 10 11 16 (v128.load (local.get $p)) ${ZERO})`;
const FORMATS: Bits[] = [
  { bits: 2, e: 4, bytes: 4, load: '(i32x4.extend_low_i16x8_u (v128.load8x8_u (local.get $p)))' },
  { bits: 3, e: 8, bytes: 12, load: TRIPLES },
  { bits: 4, e: 8, bytes: 16, load: '(v128.load (local.get $p))' },
  { bits: 6, e: 4, bytes: 12, load: TRIPLES },
  { bits: 8, e: 4, bytes: 16, load: '(v128.load (local.get $p))' },
];

const splat = (v: number) => `(v128.const i32x4 ${v} ${v} ${v} ${v})`;

/**
 * Lines loading one group's $sc and $bi at $sp in the scale dtype $kind (0 f16 through the table at 4096,
 * 1 bf16, 2 f32) and moving $sp past the pair.
 */
function scaleBias(): string[] {
  return [
    `        (if (i32.eq (local.get $kind) (i32.const 2))`,
    `          (then`,
    `            (local.set $sc (f32.load (local.get $sp)))`,
    `            (local.set $bi (f32.load offset=4 (local.get $sp)))`,
    `            (local.set $sp (i32.add (local.get $sp) (i32.const 8))))`,
    `          (else`,
    `            (if (local.get $kind)`,
    `              (then`,
    `                (local.set $sc (f32.reinterpret_i32 (i32.shl (i32.load16_u (local.get $sp)) (i32.const 16))))`,
    `                (local.set $bi (f32.reinterpret_i32 (i32.shl (i32.load16_u offset=2 (local.get $sp)) (i32.const 16)))))`,
    `              (else`,
    `                (local.set $sc (f32.load offset=4096 (i32.shl (i32.load16_u (local.get $sp)) (i32.const 2))))`,
    `                (local.set $bi (f32.load offset=4096 (i32.shl (i32.load16_u offset=2 (local.get $sp)) (i32.const 2))))))`,
    `            (local.set $sp (i32.add (local.get $sp) (i32.const 4)))))`,
  ];
}

/** Lanes of element k of each lane's run in the chunk at $v, as integers (shift, then mask). */
function lanesOf(f: Bits, k: number): string {
  const shift = f.bits * k;
  const lanes = shift === 0 ? '(local.get $v)' : `(i32x4.shr_u (local.get $v) (i32.const ${shift}))`;
  // the top element of a lane needs no mask (nothing above it)
  return shift + f.bits < (f.bytes === 12 ? 24 : f.bytes === 4 ? 8 : 32) ? `(v128.and ${lanes} ${splat((1 << f.bits) - 1)})` : lanes;
}

function dot1(f: Bits): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`  ;; ${f.bits}-bit: ${f.bytes} bytes per ${4 * f.e} columns.`);
  e(`  (func $dot1_mlx${f.bits} (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)`);
  e(`    (local $p i32) (local $sp i32) (local $xo i32) (local $xs i32) (local $qend i32) (local $ge i32) (local $gb i32) (local $kind i32)`);
  e(`    (local $v v128) (local $acc v128) (local $sv v128) (local $sb f32) (local $sc f32) (local $bi f32)`);
  e(`    (local.set $gb (i32.shr_u (i32.mul (i32.load offset=212 (i32.const 0)) (i32.const ${f.bits})) (i32.const 3)))`);
  e(`    (local.set $kind (i32.load offset=216 (i32.const 0)))`);
  e(`    (local.set $p (local.get $w))`);
  e(`    (local.set $qend (i32.add (local.get $w) (i32.shr_u (i32.mul (local.get $cols) (i32.const ${f.bits})) (i32.const 3))))`);
  e(`    (local.set $sp (local.get $qend))`);
  e(`    (local.set $xo (local.get $x))`);
  e(`    (local.set $xs (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 2))))`);
  e(`    (block $done`);
  e(`      (loop $gl`);
  e(`        (br_if $done (i32.ge_u (local.get $p) (local.get $qend)))`);
  e(`        (local.set $ge (i32.add (local.get $p) (local.get $gb)))`);
  e(`        (local.set $acc ${ZERO})`);
  e(`        (loop $cl`);
  e(`          (local.set $v ${f.load})`);
  for (let k = 0; k < f.e; k++) {
    e(`          (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (f32x4.convert_i32x4_s ${lanesOf(f, k)}) (v128.load offset=${16 * k} (local.get $xo)))))`);
  }
  e(`          (local.set $p (i32.add (local.get $p) (i32.const ${f.bytes})))`);
  e(`          (local.set $xo (i32.add (local.get $xo) (i32.const ${16 * f.e})))`);
  e(`          (br_if $cl (i32.lt_u (local.get $p) (local.get $ge))))`);
  e(`        ;; the group's scale and bias, in the weight's scale dtype`);
  L.push(...scaleBias());
  e(`        (local.set $sv (f32x4.add (local.get $sv) (f32x4.mul (f32x4.splat (local.get $sc)) (local.get $acc))))`);
  e(`        (local.set $sb (f32.add (local.get $sb) (f32.mul (local.get $bi) (f32.load (local.get $xs)))))`);
  e(`        (local.set $xs (i32.add (local.get $xs) (i32.const 4)))`);
  e(`        (br $gl)))`);
  e(`    (f32.store (local.get $out) (f32.add (call $hsum (local.get $sv)) (local.get $sb))))`);
  e(``);
  e(`  (func $dot4_mlx${f.bits} (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)`);
  for (let r = 0; r < 4; r++) {
    const w = r === 0 ? '(local.get $w)' : `(i32.add (local.get $w) (i32.mul (local.get $rb) (i32.const ${r})))`;
    e(`    (call $dot1_mlx${f.bits} ${w} (local.get $rb) (local.get $x) (local.get $cols) (i32.add (local.get $out) (i32.const ${4 * r})))${r === 3 ? ')' : ''}`);
  }
  e(``);
  return L;
}

/**
 * Two rows against 4 tokens (a prompt batch, $rows_affine): each chunk of packed bytes is unpacked and
 * converted once for the 4 tokens, and each activation vector loaded once for the 2 rows. Per row and
 * token the f32 operations are $dot1_mlx's, in its order (the group's 4-lane sum, scaled into the row's
 * vector sum, bias·Σx into a scalar sum), so every token gets its 1-token bits. Rows at w and w + rb;
 * token i's activations at x + i·xs, its outputs at out + i·os (+ 4 for the second row).
 */
function dot2x4(f: Bits): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const T = [0, 1, 2, 3];
  const R = [0, 1];
  const A = R.flatMap((r) => T.map((i) => `${r}${i}`));
  e(`  (func $dot2x4_mlx${f.bits} (type $dot2) (param $w i32) (param $rb i32) (param $x i32) (param $xs i32) (param $cols i32) (param $out i32) (param $os i32)`);
  e(`    (local $p i32) (local $sp i32) (local $s0 i32) (local $s1 i32) (local $xsum i32) (local $qend i32) (local $ge i32) (local $gb i32) (local $kind i32) (local $v v128) (local $c0 v128) (local $c1 v128) (local $xv v128)`);
  e(`    (local $sc0 f32) (local $bi0 f32) (local $sc1 f32) (local $bi1 f32) (local $sc f32) (local $bi f32)`);
  e(`   ${T.map((i) => ` (local $x${i} i32)`).join('')}${A.map((a) => ` (local $acc${a} v128) (local $sv${a} v128) (local $sb${a} f32)`).join('')}`);
  e(`    (local.set $gb (i32.shr_u (i32.mul (i32.load offset=212 (i32.const 0)) (i32.const ${f.bits})) (i32.const 3)))`);
  e(`    (local.set $kind (i32.load offset=216 (i32.const 0)))`);
  e(`    (local.set $p (local.get $w))`);
  e(`    (local.set $qend (i32.add (local.get $w) (i32.shr_u (i32.mul (local.get $cols) (i32.const ${f.bits})) (i32.const 3))))`);
  e(`    (local.set $sp (local.get $qend))`);
  for (const i of T) e(`    (local.set $x${i} (i32.add (local.get $x) (i32.mul (local.get $xs) (i32.const ${i}))))`);
  e(`    (local.set $xsum (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 2))))`);
  e(`    (block $done`);
  e(`      (loop $gl`);
  e(`        (br_if $done (i32.ge_u (local.get $p) (local.get $qend)))`);
  e(`        (local.set $ge (i32.add (local.get $p) (local.get $gb)))`);
  for (const a of A) e(`        (local.set $acc${a} ${ZERO})`);
  e(`        (loop $cl`);
  for (let k = 0; k < f.e; k++) {
    for (const r of R) {
      e(`          (local.set $v ${r ? f.load.replace('(local.get $p)', '(i32.add (local.get $p) (local.get $rb))') : f.load})`);
      e(`          (local.set $c${r} (f32x4.convert_i32x4_s ${lanesOf(f, k)}))`);
    }
    for (const i of T) {
      e(`          (local.set $xv (v128.load offset=${16 * k} (local.get $x${i})))`);
      for (const r of R) e(`          (local.set $acc${r}${i} (f32x4.add (local.get $acc${r}${i}) (f32x4.mul (local.get $c${r}) (local.get $xv))))`);
    }
  }
  e(`          (local.set $p (i32.add (local.get $p) (i32.const ${f.bytes})))`);
  for (const i of T) e(`          (local.set $x${i} (i32.add (local.get $x${i}) (i32.const ${16 * f.e})))`);
  e(`          (br_if $cl (i32.lt_u (local.get $p) (local.get $ge))))`);
  e(`        ;; the two rows' scales and biases (the second row's rb past the first's); $sp moves past the first's`);
  e(`        (local.set $s0 (local.get $sp))`);
  L.push(...scaleBias());
  e(`        (local.set $sc0 (local.get $sc)) (local.set $bi0 (local.get $bi)) (local.set $s1 (local.get $sp))`);
  e(`        (local.set $sp (i32.add (local.get $s0) (local.get $rb)))`);
  L.push(...scaleBias());
  e(`        (local.set $sc1 (local.get $sc)) (local.set $bi1 (local.get $bi)) (local.set $sp (local.get $s1))`);
  for (const r of R) {
    for (const i of T) {
      e(`        (local.set $sv${r}${i} (f32x4.add (local.get $sv${r}${i}) (f32x4.mul (f32x4.splat (local.get $sc${r})) (local.get $acc${r}${i}))))`);
      e(`        (local.set $sb${r}${i} (f32.add (local.get $sb${r}${i}) (f32.mul (local.get $bi${r}) (f32.load (i32.add (local.get $xsum) (i32.mul (local.get $xs) (i32.const ${i})))))))`);
    }
  }
  e(`        (local.set $xsum (i32.add (local.get $xsum) (i32.const 4)))`);
  e(`        (br $gl)))`);
  for (const r of R) for (const i of T) e(`    (f32.store offset=${4 * r} (i32.add (local.get $out) (i32.mul (local.get $os) (i32.const ${i}))) (f32.add (call $hsum (local.get $sv${r}${i})) (local.get $sb${r}${i})))`);
  e(`  )`);
  e(``);
  return L;
}

/**
 * Prompt batches (n >= 4 tokens) of a row-major MLX weight (kernel k: $dot4_mlx<bits>, k + 1 its
 * $dot1): pairs of rows of [r0, r1) against 4 tokens at a time ($dot2x4_mlx<bits>, table 50 + (k − 36)/2),
 * the n % 4 tokens left (and an unpaired last row) one at a time with $dot1. The batch gives each token
 * its 1-token bits.
 */
function rowsAffine(): string[] {
  return `  (func $rows_affine (param $k i32) (param $out i32) (param $w i32) (param $x i32) (param $rows i32) (param $cols i32)
                     (param $n i32) (param $rb i32) (param $xs i32) (param $r0 i32) (param $r1 i32)
    (local $r i32) (local $b i32) (local $wr i32) (local $t i32) (local $os i32) (local $pair i32)
    (local.set $t (i32.add (i32.const 50) (i32.shr_u (i32.sub (local.get $k) (i32.const 36)) (i32.const 1))))
    (local.set $os (i32.shl (local.get $rows) (i32.const 2)))
    (local.set $r (local.get $r0))
    (block $rdone
      (loop $rl
        (br_if $rdone (i32.ge_u (local.get $r) (local.get $r1)))
        (local.set $wr (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))))
        (local.set $pair (i32.le_u (i32.add (local.get $r) (i32.const 2)) (local.get $r1)))
        (local.set $b (i32.const 0))
        (block $tdone
          (loop $tl
            (br_if $tdone (i32.or (i32.eqz (local.get $pair)) (i32.gt_u (i32.add (local.get $b) (i32.const 4)) (local.get $n))))
            (call_indirect (type $dot2) (local.get $wr) (local.get $rb) (i32.add (local.get $x) (i32.mul (local.get $b) (local.get $xs))) (local.get $xs) (local.get $cols)
              (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $b) (local.get $rows)) (local.get $r)) (i32.const 2))) (local.get $os) (local.get $t))
            (local.set $b (i32.add (local.get $b) (i32.const 4)))
            (br $tl)))
        ;; the tokens left (and every token of a last unpaired row) one row at a time
        (block $odone
          (loop $ol
            (br_if $odone (i32.ge_u (local.get $b) (local.get $n)))
            (call_indirect (type $dot) (local.get $wr) (local.get $rb) (i32.add (local.get $x) (i32.mul (local.get $b) (local.get $xs))) (local.get $cols)
              (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $b) (local.get $rows)) (local.get $r)) (i32.const 2))) (i32.add (local.get $k) (i32.const 1)))
            (if (local.get $pair)
              (then
                (call_indirect (type $dot) (i32.add (local.get $wr) (local.get $rb)) (local.get $rb) (i32.add (local.get $x) (i32.mul (local.get $b) (local.get $xs))) (local.get $cols)
                  (i32.add (local.get $out) (i32.shl (i32.add (i32.mul (local.get $b) (local.get $rows)) (i32.add (local.get $r) (i32.const 1))) (i32.const 2))) (i32.add (local.get $k) (i32.const 1)))))
            (local.set $b (i32.add (local.get $b) (i32.const 1)))
            (br $ol)))
        (local.set $r (i32.add (local.get $r) (i32.add (local.get $pair) (i32.const 1))))
        (br $rl))))
`.split('\n');
}

function prep(): string[] {
  return `  ;; n tokens of cols floats into the affine activation order: per 4·e columns, e vectors, vector k lane i
  ;; = x[e·i + k]; then per token the f32 sum of each group of g columns (in column order). Token stride
  ;; cols·4 + (cols/g)·4 bytes.
  (func (export "prep_affine") (param $x i32) (param $dst i32) (param $cols i32) (param $n i32) (param $e i32) (param $g i32)
    (local $b i32) (local $c i32) (local $i i32) (local $k i32) (local $s i32) (local $d i32) (local $sum f32) (local $j i32)
    (block $bdone
      (loop $bl
        (br_if $bdone (i32.ge_u (local.get $b) (local.get $n)))
        (local.set $c (i32.const 0))
        (block $cdone
          (loop $cl
            (br_if $cdone (i32.ge_u (local.get $c) (local.get $cols)))
            ;; chunk at column c: element (i, k) is x[c + e·i + k]
            (local.set $k (i32.const 0))
            (block $kdone
              (loop $kl
                (br_if $kdone (i32.ge_u (local.get $k) (local.get $e)))
                (local.set $i (i32.const 0))
                (block $idone
                  (loop $il
                    (br_if $idone (i32.ge_u (local.get $i) (i32.const 4)))
                    (f32.store (local.get $dst)
                      (f32.load (i32.add (local.get $x) (i32.shl (i32.add (local.get $c) (i32.add (i32.mul (local.get $e) (local.get $i)) (local.get $k))) (i32.const 2)))))
                    (local.set $dst (i32.add (local.get $dst) (i32.const 4)))
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br $il)))
                (local.set $k (i32.add (local.get $k) (i32.const 1)))
                (br $kl)))
            (local.set $c (i32.add (local.get $c) (i32.shl (local.get $e) (i32.const 2))))
            (br $cl)))
        (local.set $c (i32.const 0))
        (block $gdone
          (loop $gl
            (br_if $gdone (i32.ge_u (local.get $c) (local.get $cols)))
            (local.set $sum (f32.const 0))
            (local.set $j (i32.const 0))
            (block $sdone
              (loop $sl
                (br_if $sdone (i32.ge_u (local.get $j) (local.get $g)))
                (local.set $sum (f32.add (local.get $sum) (f32.load (i32.add (local.get $x) (i32.shl (i32.add (local.get $c) (local.get $j)) (i32.const 2))))))
                (local.set $j (i32.add (local.get $j) (i32.const 1)))
                (br $sl)))
            (f32.store (local.get $dst) (local.get $sum))
            (local.set $dst (i32.add (local.get $dst) (i32.const 4)))
            (local.set $c (i32.add (local.get $c) (local.get $g)))
            (br $gl)))
        (local.set $x (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 2))))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (br $bl))))
`.split('\n');
}

const I32 = (v: string) => `(v128.const i32x4 ${v} ${v} ${v} ${v})`;
/** The low nibble of each byte widened to i16. */
const LOW = '(v128.const i16x8 15 15 15 15 15 15 15 15)';
/** Activation levels: 15-bit (±16383), so the block totals stay exact in i32 and far finer than 8 bits. */
const LEVELS = 16383;

/**
 * Packed 4-bit MLX weights (pack.ts: 4 rows per group; per MLX group the 4 rows' (scale, bias) pairs,
 * then per 32 columns the 4 rows' 16 bytes) with integer activations: 15-bit per MLX group (±16383,
 * quant_mlx4) — integer dot products at the speed of the 8-bit formats, but ~128× finer than 8 bits, so
 * results stay within ~1e-4 of MLX's float arithmetic (8-bit activations moved random models' logits by
 * ~0.06 and their greedy tokens). Byte k of a row holds elements 2k (low nibble) and 2k + 1 (high);
 * the activations come per 16 columns as the 8 even ones, then the 8 odd ones. |q·x| ≤ 15·16383, so a
 * group's total (≤ 128 columns) is exact in i32. The activation scale is per group, not per 32 columns,
 * so the 4 rows' i32 sums run through the whole group and are transposed, converted and scaled once per
 * group: that took ~14 of the ~75 instructions per 32 columns out of the loop (decode ~1.15x). Per MLX
 * group the 4 rows' totals times d_x are scaled by their scales and their biases times the group's f32
 * sum of x are added.
 */
function packed4(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(`  ;; Bytes of one packed 4-row group of a 4-bit MLX weight: the 4 rows' nibbles and (scale, bias) pairs.`);
  e(`  (func $mlx4_group_bytes (param $cols i32) (param $kind i32) (result i32)`);
  e(`    (i32.add (i32.shl (local.get $cols) (i32.const 1))`);
  e(`      (i32.mul (i32.div_u (local.get $cols) (i32.load offset=212 (i32.const 0))) (select (i32.const 32) (i32.const 16) (i32.eq (local.get $kind) (i32.const 2))))))`);
  e(``);
  L.push(...g4mlx4('both'), `  ;; @if relaxed`, ...g4mlx4('pairs'), `  ;; @end`, ``);
  e(`  ;; One row-major 4-bit row (the rows%4 tail of a packed weight) with quant_mlx4's activations: the`);
  e(`  ;; group kernel's arithmetic for one row (same integers, same f32 steps and order).`);
  e(`  (func $dot1q_mlx4 (type $dot) (param $w i32) (param $rb i32) (param $x i32) (param $cols i32) (param $out i32)`);
  e(`    (local $p i32) (local $sp i32) (local $qend i32) (local $ge i32) (local $gb i32) (local $kind i32) (local $xq i32) (local $xd i32) (local $xs i32)`);
  e(`    (local $q v128) (local $t v128) (local $gacc f32) (local $s f32) (local $sc f32) (local $bi f32)`);
  e(`    (local.set $gb (i32.shr_u (i32.load offset=212 (i32.const 0)) (i32.const 1)))`);
  e(`    (local.set $kind (i32.load offset=216 (i32.const 0)))`);
  e(`    (local.set $p (local.get $w))`);
  e(`    (local.set $qend (i32.add (local.get $w) (i32.shr_u (local.get $cols) (i32.const 1))))`);
  e(`    (local.set $sp (local.get $qend))`);
  e(`    (local.set $xq (local.get $x))`);
  e(`    (local.set $xd (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))))`);
  e(`    (local.set $xs (i32.add (local.get $xd) (i32.shl (i32.div_u (local.get $cols) (i32.load offset=212 (i32.const 0))) (i32.const 2))))`);
  e(`    (block $done`);
  e(`      (loop $l`);
  e(`        (br_if $done (i32.ge_u (local.get $p) (local.get $qend)))`);
  e(`        (local.set $ge (i32.add (local.get $p) (local.get $gb)))`);
  e(`        (local.set $t ${I32('0')})`);
  e(`        (loop $bl`);
  e(`          (local.set $q (v128.load8x8_u (local.get $p)))`);
  e(`          (local.set $t (i32x4.add (local.get $t) (i32x4.add`);
  e(`            (i32x4.add (i32x4.dot_i16x8_s (v128.and (local.get $q) ${LOW}) (v128.load offset=0 (local.get $xq))) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (v128.load offset=16 (local.get $xq))))`);
  e(`            (i32x4.add (i32x4.dot_i16x8_s (v128.and (local.tee $q (v128.load8x8_u offset=8 (local.get $p))) ${LOW}) (v128.load offset=32 (local.get $xq)))`);
  e(`                       (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (v128.load offset=48 (local.get $xq)))))))`);
  e(`          (local.set $p (i32.add (local.get $p) (i32.const 16)))`);
  e(`          (local.set $xq (i32.add (local.get $xq) (i32.const 64)))`);
  e(`          (br_if $bl (i32.lt_u (local.get $p) (local.get $ge))))`);
  e(`        (local.set $gacc (f32.mul (f32.convert_i32_s (call $hsum_i32 (local.get $t))) (f32.load (local.get $xd))))`);
  e(`        (local.set $xd (i32.add (local.get $xd) (i32.const 4)))`);
  L.push(...scaleBias());
  e(`        (local.set $s (f32.add (local.get $s) (f32.add (f32.mul (local.get $sc) (local.get $gacc)) (f32.mul (local.get $bi) (f32.load (local.get $xs))))))`);
  e(`        (local.set $xs (i32.add (local.get $xs) (i32.const 4)))`);
  e(`        (br $l)))`);
  e(`    (f32.store (local.get $out) (local.get $s)))`);
  e(``);
  e(`  ;; n tokens of cols floats into quant_mlx4's format, cols·2 + (cols/g)·8 bytes per token: per MLX group`);
  e(`  ;; d = amax/${LEVELS} and q = nearest-even(x·${LEVELS}/amax) laid out per 16 columns as the 8 even q, then`);
  e(`  ;; the 8 odd q; then the d per group; then each group's f32 sum of x (for the biases, as the f32 kernels).`);
  e(`  (func (export "quant_mlx4") (param $x i32) (param $dst i32) (param $cols i32) (param $n i32) (param $g i32)`);
  e(`    (local $b i32) (local $c i32) (local $s i32) (local $q i32) (local $dd i32) (local $j i32) (local $pa i32) (local $sum f32)`);
  e(`    (local $mx v128) (local $id v128) (local $a v128) (local $bv v128) (local $amax f32)`);
  e(`    (local.set $s (local.get $x))`);
  e(`    (local.set $q (local.get $dst))`);
  e(`    (block $bdone`);
  e(`      (loop $bl`);
  e(`        (br_if $bdone (i32.ge_u (local.get $b) (local.get $n)))`);
  e(`        (local.set $dd (i32.add (local.get $q) (i32.shl (local.get $cols) (i32.const 1))))`);
  e(`        (local.set $c (i32.const 0))`);
  e(`        (block $cdone`);
  e(`          (loop $cl`);
  e(`            (br_if $cdone (i32.ge_u (local.get $c) (local.get $cols)))`);
  e(`            ;; the group's amax (an integer max of |x|'s bits, as quant_q8), then its 32-column blocks at one d`);
  e(`            (local.set $mx ${I32('0')})`);
  e(`            (local.set $j (i32.const 0))`);
  e(`            (loop $ml`);
  e(`              (local.set $pa (i32.add (local.get $s) (i32.shl (local.get $j) (i32.const 2))))`);
  e(`              (local.set $mx (i32x4.max_s (local.get $mx) (i32x4.max_s (i32x4.max_s (i32x4.max_s (f32x4.abs (v128.load offset=0 (local.get $pa))) (f32x4.abs (v128.load offset=16 (local.get $pa))))`);
  e(`                                                  (i32x4.max_s (f32x4.abs (v128.load offset=32 (local.get $pa))) (f32x4.abs (v128.load offset=48 (local.get $pa)))))`);
  e(`                                     (i32x4.max_s (i32x4.max_s (f32x4.abs (v128.load offset=64 (local.get $pa))) (f32x4.abs (v128.load offset=80 (local.get $pa))))`);
  e(`                                                  (i32x4.max_s (f32x4.abs (v128.load offset=96 (local.get $pa))) (f32x4.abs (v128.load offset=112 (local.get $pa))))))))`);
  e(`              (br_if $ml (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 32))) (local.get $g))))`);
  e(`            (local.set $amax (f32x4.lanemax (local.get $mx)))`);
  e(`            (f32.store (local.get $dd) (f32.div (local.get $amax) (f32.const ${LEVELS})))`);
  e(`            (local.set $id (f32x4.splat (if (result f32) (f32.gt (local.get $amax) (f32.const 0)) (then (f32.div (f32.const ${LEVELS}) (local.get $amax))) (else (f32.const 0)))))`);
  e(`            (local.set $j (i32.const 0))`);
  e(`            (loop $ql`);
  for (const h of [0, 1]) {
    e(`              ;; columns ${16 * h}..${16 * h + 15} of the block: the even ones, then the odd ones`);
    const qv = (k: number) => `(i32x4.trunc_sat_f32x4_s (f32x4.nearest (f32x4.mul (v128.load offset=${64 * h + 16 * k} (local.get $s)) (local.get $id))))`;
    e(`              (local.set $a (i16x8.narrow_i32x4_s ${qv(0)} ${qv(1)}))`);
    e(`              (local.set $bv (i16x8.narrow_i32x4_s ${qv(2)} ${qv(3)}))`);
    e(`              (v128.store offset=${32 * h} (local.get $q) (i8x16.shuffle 0 1 4 5 8 9 12 13 16 17 20 21 24 25 28 29 (local.get $a) (local.get $bv)))`);
    e(`              (v128.store offset=${32 * h + 16} (local.get $q) (i8x16.shuffle 2 3 6 7 10 11 14 15 18 19 22 23 26 27 30 31 (local.get $a) (local.get $bv)))`);
  }
  e(`              (local.set $s (i32.add (local.get $s) (i32.const 128)))`);
  e(`              (local.set $q (i32.add (local.get $q) (i32.const 64)))`);
  e(`              (br_if $ql (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 32))) (local.get $g))))`);
  e(`            (local.set $dd (i32.add (local.get $dd) (i32.const 4)))`);
  e(`            (local.set $c (i32.add (local.get $c) (local.get $g)))`);
  e(`            (br $cl)))`);
  e(`        ;; group sums of this token's x (in column order)`);
  e(`        (local.set $s (i32.sub (local.get $s) (i32.shl (local.get $cols) (i32.const 2))))`);
  e(`        (local.set $c (i32.const 0))`);
  e(`        (block $gdone`);
  e(`          (loop $gl`);
  e(`            (br_if $gdone (i32.ge_u (local.get $c) (local.get $cols)))`);
  e(`            (local.set $sum (f32.const 0))`);
  e(`            (local.set $j (i32.const 0))`);
  e(`            (block $sdone`);
  e(`              (loop $sl`);
  e(`                (br_if $sdone (i32.ge_u (local.get $j) (local.get $g)))`);
  e(`                (local.set $sum (f32.add (local.get $sum) (f32.load (local.get $s))))`);
  e(`                (local.set $s (i32.add (local.get $s) (i32.const 4)))`);
  e(`                (local.set $j (i32.add (local.get $j) (i32.const 1)))`);
  e(`                (br $sl)))`);
  e(`            (f32.store (local.get $dd) (local.get $sum))`);
  e(`            (local.set $dd (i32.add (local.get $dd) (i32.const 4)))`);
  e(`            (local.set $c (i32.add (local.get $c) (local.get $g)))`);
  e(`            (br $gl)))`);
  e(`        (local.set $q (local.get $dd))`);
  e(`        (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
  e(`        (br $bl))))`);
  e(``);
  L.push(...quantDecode());
  return L;
}

/** The packed 4-bit MLX group kernel: both builds' $g4_mlx4, or the relaxed build's $g4_mlx4_pairs. */
function g4mlx4(form: 'both' | 'pairs'): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  if (form === 'both') e(`  ;; 4 packed rows of a 4-bit MLX weight, 15-bit activations from quant_mlx4 (see above).`);
  else {
    e(`  ;; The relaxed $g4_mlx4 for groups of 32 and 128 columns: rows 0-1, then rows 2-3 in one pass each over`);
    e(`  ;; the group's blocks (x read twice; 4 live i16 sums per pass).`);
  }
  e(`  (func ${form === 'both' ? '$g4_mlx4' : '$g4_mlx4_pairs'} (type $gdot) (param $w i32) (param $cols i32) (param $x i32) (param $out i32) (param $groups i32)`);
  e(`    (local $g i32) (local $p i32) (local $end i32) (local $ge i32) (local $gb i32) (local $kind i32) (local $xq i32) (local $xd i32) (local $xs i32)`);
  e(`    (local $x0 v128) (local $x1 v128) (local $x2 v128) (local $x3 v128) (local $q v128)`);
  e(`    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128) (local $t0 v128) (local $t1 v128)`);
  e(`    (local $gacc v128) (local $acc v128) (local $v v128) (local $sc v128) (local $bi v128)`);
  if (form === 'both') e(`    ;; @if relaxed`);
  e(`    (local $h0 v128) (local $h1 v128) (local $h2 v128) (local $h3 v128) (local $l0 v128) (local $l1 v128) (local $l2 v128) (local $l3 v128)`);
  e(`    (local $lo v128) (local $hi v128) (local $mn v128) (local $p0 i32) (local $xq0 i32)`);
  e(`    (local.set $mn ${NIBBLES})`);
  if (form === 'both') e(`    ;; @end`);
  e(`    ;; bytes of one MLX group's columns in the 4 rows' blocks, and the scale dtype`);
  e(`    (local.set $gb (i32.shl (i32.load offset=212 (i32.const 0)) (i32.const 1)))`);
  e(`    (local.set $kind (i32.load offset=216 (i32.const 0)))`);
  if (form === 'both') {
    e(`    ;; @if relaxed`);
    e(`    ;; groups of 64 columns here (the 4 rows in one pass), others in $g4_mlx4_pairs: each the faster`);
    e(`    ;; form there (bench:kernels, wasm/README.md)`);
    e(`    (if (i32.ne (local.get $gb) (i32.const 128))`);
    e(`      (then`);
    e(`        (call $g4_mlx4_pairs (local.get $w) (local.get $cols) (local.get $x) (local.get $out) (local.get $groups))`);
    e(`        (return)))`);
    e(`    ;; @end`);
  }
  e(`    (local.set $p (local.get $w))`);
  e(`    (block $gdone`);
  e(`      (loop $gl`);
  e(`        (br_if $gdone (i32.ge_u (local.get $g) (local.get $groups)))`);
  e(`        (local.set $end (i32.add (local.get $p) (call $mlx4_group_bytes (local.get $cols) (local.get $kind))))`);
  e(`        (local.set $xq (local.get $x))`);
  e(`        (local.set $xd (i32.add (local.get $x) (i32.shl (local.get $cols) (i32.const 1))))`);
  e(`        (local.set $xs (i32.add (local.get $xd) (i32.shl (i32.div_u (local.get $cols) (i32.load offset=212 (i32.const 0))) (i32.const 2))))`);
  e(`        (local.set $acc ${I32('0')})`);
  e(`        (block $done`);
  e(`          (loop $l`);
  e(`            (br_if $done (i32.ge_u (local.get $p) (local.get $end)))`);
  e(`            ;; the 4 rows' scales and biases of this MLX group (lane r), then its blocks`);
  L.push(...scaleBias4('            '));
  e(`            (local.set $ge (i32.add (local.get $p) (local.get $gb)))`);
  L.push(...splitBlocks4(form === 'both' ? [[0, 1, 2, 3]] : [[0, 1], [2, 3]], form === 'both'));
  if (form === 'both') {
    e(`            ;; @else`);
    for (let r = 0; r < 4; r++) e(`            (local.set $s${r} ${I32('0')})`);
    // (two blocks per iteration measured 5-10% slower, hot and cold: one block per iteration it stays)
    e(`            (loop $bl`);
    for (let k = 0; k < 4; k++) e(`              (local.set $x${k} (v128.load offset=${16 * k} (local.get $xq)))`);
    for (let r = 0; r < 4; r++) {
      e(`              (local.set $q (v128.load8x8_u offset=${16 * r} (local.get $p)))`);
      e(`              (local.set $s${r} (i32x4.add (local.get $s${r}) (i32x4.add (i32x4.dot_i16x8_s (v128.and (local.get $q) ${LOW}) (local.get $x0)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x1)))))`);
      e(`              (local.set $q (v128.load8x8_u offset=${16 * r + 8} (local.get $p)))`);
      e(`              (local.set $s${r} (i32x4.add (local.get $s${r}) (i32x4.add (i32x4.dot_i16x8_s (v128.and (local.get $q) ${LOW}) (local.get $x2)) (i32x4.dot_i16x8_s (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $x3)))))`);
    }
    e(`              (local.set $p (i32.add (local.get $p) (i32.const 64)))`);
    e(`              (local.set $xq (i32.add (local.get $xq) (i32.const 64)))`);
    e(`              (br_if $bl (i32.lt_u (local.get $p) (local.get $ge))))`);
    e(`            ;; @end`);
  }
  e(`            ;; lane r: row r's group total (exact in i32), times the group's d_x`);
  e(`            (local.set $t0 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s0) (local.get $s1))`);
  e(`                                      (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s0) (local.get $s1))))`);
  e(`            (local.set $t1 (i32x4.add (i8x16.shuffle 0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23 (local.get $s2) (local.get $s3))`);
  e(`                                      (i8x16.shuffle 8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31 (local.get $s2) (local.get $s3))))`);
  e(`            (local.set $gacc (f32x4.mul (f32x4.convert_i32x4_s`);
  e(`              (i32x4.add (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $t0) (local.get $t1))`);
  e(`                         (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $t0) (local.get $t1))))`);
  e(`              (f32x4.splat (f32.load (local.get $xd)))))`);
  e(`            (local.set $xd (i32.add (local.get $xd) (i32.const 4)))`);
  e(`            (local.set $acc (f32x4.add (local.get $acc) (f32x4.add (f32x4.mul (local.get $sc) (local.get $gacc))`);
  e(`              (f32x4.mul (local.get $bi) (f32x4.splat (f32.load (local.get $xs)))))))`);
  e(`            (local.set $xs (i32.add (local.get $xs) (i32.const 4)))`);
  e(`            (br $l)))`);
  e(`        (v128.store (local.get $out) (local.get $acc))`);
  e(`        (local.set $out (i32.add (local.get $out) (i32.const 16)))`);
  e(`        (local.set $g (i32.add (local.get $g) (i32.const 1)))`);
  e(`        (br $gl))))`);
  return L;
}

/** The 4-bit nibble mask as bytes (one i8x16 lane per packed byte). */
const NIBBLES = '(v128.const i32x4 0x0f0f0f0f 0x0f0f0f0f 0x0f0f0f0f 0x0f0f0f0f)';

/**
 * The relaxed build's $g4_mlx4 group: each 15-bit activation split once per matvec (quant_mlx4_decode) as
 * x = 128·(x >> 7) + (x & 127), both int8; per row and 32 columns the 16 bytes' nibbles (0..15, a valid i7
 * operand) in four i16x8.relaxed_dot_i8x16_i7x16_s, summed in i16 over the whole group and widened once per
 * group, so the 4 rows' i32 group totals are the baseline's exactly. The first block sets the sums.
 * Measured, one pass of 4 rows (bench:kernels --hot --simd both, 1 thread): g64 1.11-1.17x, g128 1.05-1.09x, g32 0.99-1.03x of
 * the baseline's loop; without setting the sums from the first block g64 was 1.02-1.04x, and with x read
 * from memory at each use instead of 4 registers (TurboFan spills some of the 8 sums) g64 0.98x.
 * passes: the rows of each pass over the group's blocks ([[0, 1, 2, 3]] for $g4_mlx4 at g = 64, rows 0-1
 * then 2-3 for $g4_mlx4_pairs: x read twice, 4 live sums a pass); marked: inside $g4_mlx4's relaxed branch.
 */
function splitBlocks4(passes: number[][], marked: boolean): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const dots = (a: string, b: string) =>
    `(i16x8.add (i16x8.relaxed_dot_i8x16_i7x16_s (local.get $${a}) (local.get $lo)) (i16x8.relaxed_dot_i8x16_i7x16_s (local.get $${b}) (local.get $hi)))`;
  const block = (ind: string, acc: boolean, rows: number[]) => {
    for (let k = 0; k < 4; k++) e(`${ind}(local.set $x${k} (v128.load offset=${16 * k} (local.get $xq)))`);
    for (const r of rows) {
      e(`${ind}(local.set $q (v128.load offset=${16 * r} (local.get $p)))`);
      e(`${ind}(local.set $lo (v128.and (local.get $q) (local.get $mn)))`);
      e(`${ind}(local.set $hi (v128.and (i16x8.shr_u (local.get $q) (i32.const 4)) (local.get $mn)))`);
      e(`${ind}(local.set $h${r} ${acc ? `(i16x8.add (local.get $h${r}) ${dots('x0', 'x1')})` : dots('x0', 'x1')})`);
      e(`${ind}(local.set $l${r} ${acc ? `(i16x8.add (local.get $l${r}) ${dots('x2', 'x3')})` : dots('x2', 'x3')})`);
    }
    e(`${ind}(local.set $p (i32.add (local.get $p) (i32.const 64)))`);
    e(`${ind}(local.set $xq (i32.add (local.get $xq) (i32.const 64)))`);
  };
  // one pass of the group's blocks for `rows` (ind: the pass's indent)
  const pass = (ind: string, rows: number[]) => {
    const tag = rows.join('');
    block(ind, false, rows);
    e(`${ind}(block $bd${tag}`);
    e(`${ind}  (loop $bl${tag}`);
    e(`${ind}    (br_if $bd${tag} (i32.ge_u (local.get $p) (local.get $ge)))`);
    block(`${ind}    `, true, rows);
    e(`${ind}    (br $bl${tag})))`);
  };
  if (marked) e(`            ;; @if relaxed`);
  e(`            ;; x in quant_mlx4_decode's form: per block x >> 7 of the even and of the odd columns, then`);
  e(`            ;; x & 127 of both, as int8. Per row r the 16 bytes' low nibbles (even columns) and high nibbles`);
  e(`            ;; (odd), 0..15, a valid i7 operand, in relaxed dots: h_r sums q·(x >> 7), l_r sums q·(x & 127)`);
  e(`            ;; in i16 lanes over the whole group (each lane 2 pairs per block, 4 blocks at most for g <= 128:`);
  e(`            ;; |sum| <= 4·2·2·15·128 = 30720, no wrap), then one widening per group: 128·h + l is each`);
  e(`            ;; column pair's exact Σq·x, the baseline's i32 totals. The first block sets the sums (no zeroing).`);
  if (passes.length > 1) {
    e(`            (local.set $p0 (local.get $p))`);
    e(`            (local.set $xq0 (local.get $xq))`);
  }
  passes.forEach((rows, i) => {
    if (i > 0) {
      e(`            (local.set $p (local.get $p0))`);
      e(`            (local.set $xq (local.get $xq0))`);
    }
    pass('            ', rows);
  });
  for (let r = 0; r < 4; r++) {
    e(`            (local.set $s${r} (i32x4.add (i32x4.dot_i16x8_s (local.get $h${r}) (v128.const i16x8 128 128 128 128 128 128 128 128))`);
    e(`                                        (i32x4.dot_i16x8_s (local.get $l${r}) (v128.const i16x8 1 1 1 1 1 1 1 1))))`);
  }
  return L;
}

/** The relaxed build's one-token activations for $g4_mlx4 (the converter the backend runs per matvec). */
function quantDecode(): string[] {
  return [
    `  ;; @if relaxed`,
    `  ;; One token of quant_mlx4's output at src into $g4_mlx4's relaxed form at dst (as many bytes): per 32`,
    `  ;; columns the 16 even and the 16 odd columns' x >> 7 (-128..127), then their x & 127 (0..127), as int8`,
    `  ;; in the order of the weights' low and high nibbles (x = 128·(x >> 7) + (x & 127) exactly); then the`,
    `  ;; groups' d_x and sums as they are. Done once per matvec, not once per 4-row group and block.`,
    `  (func (export "quant_mlx4_decode") (param $src i32) (param $dst i32) (param $cols i32) (param $g i32)`,
    `    (local $end i32) (local $v0 v128) (local $v1 v128) (local $v2 v128) (local $v3 v128) (local $m v128)`,
    `    (local.set $m (v128.const i16x8 127 127 127 127 127 127 127 127))`,
    `    (local.set $end (i32.add (local.get $src) (i32.shl (local.get $cols) (i32.const 1))))`,
    `    (block $done`,
    `      (loop $l`,
    `        (br_if $done (i32.ge_u (local.get $src) (local.get $end)))`,
    `        ;; columns 0..15 even, 0..15 odd, 16..31 even, 16..31 odd`,
    ...[0, 1, 2, 3].map((k) => `        (local.set $v${k} (v128.load offset=${16 * k} (local.get $src)))`),
    `        (v128.store offset=0 (local.get $dst) (i8x16.narrow_i16x8_s (i16x8.shr_s (local.get $v0) (i32.const 7)) (i16x8.shr_s (local.get $v2) (i32.const 7))))`,
    `        (v128.store offset=16 (local.get $dst) (i8x16.narrow_i16x8_s (i16x8.shr_s (local.get $v1) (i32.const 7)) (i16x8.shr_s (local.get $v3) (i32.const 7))))`,
    `        (v128.store offset=32 (local.get $dst) (i8x16.narrow_i16x8_s (v128.and (local.get $v0) (local.get $m)) (v128.and (local.get $v2) (local.get $m))))`,
    `        (v128.store offset=48 (local.get $dst) (i8x16.narrow_i16x8_s (v128.and (local.get $v1) (local.get $m)) (v128.and (local.get $v3) (local.get $m))))`,
    `        (local.set $src (i32.add (local.get $src) (i32.const 64)))`,
    `        (local.set $dst (i32.add (local.get $dst) (i32.const 64)))`,
    `        (br $l)))`,
    `    ;; the groups' d_x, then their sums: 8 bytes per group`,
    `    (local.set $end (i32.add (local.get $src) (i32.shl (i32.div_u (local.get $cols) (local.get $g)) (i32.const 3))))`,
    `    (block $cdone`,
    `      (loop $cl`,
    `        (br_if $cdone (i32.ge_u (local.get $src) (local.get $end)))`,
    `        (i64.store (local.get $dst) (i64.load (local.get $src)))`,
    `        (local.set $src (i32.add (local.get $src) (i32.const 8)))`,
    `        (local.set $dst (i32.add (local.get $dst) (i32.const 8)))`,
    `        (br $cl))))`,
    `  ;; @end`,
    ``,
  ];
}

export function affineSection(): string {
  return HEADER + [...FORMATS.flatMap((f) => [...dot1(f), ...dot2x4(f)]), ...rowsAffine(), ...prep(), ...packed4(), ...mlxTiles()].join('\n');
}

export const AFFINE_SECTION: Section = { name: 'affine', script: 'affine.ts', text: affineSection };

export const withAffineSection = (wat: string) => withGenerated(wat, AFFINE_SECTION);

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) runGenerator(AFFINE_SECTION, process.argv);
