/**
 * Writes the MLX affine section of kernels.wat (between the `>>> affine` / `<<< affine` markers): dot
 * kernels for packed MLX weights (src/quant/mlx.ts: per row the packed bits, then (scale, bias) per
 * group) at 2, 3, 4, 6 and 8 bits, and their activation preparation. The five differ only in how a
 * chunk of packed bytes becomes 4 lanes of integers, so they are generated:
 * `pnpm exec tsx packages/engine/wasm/affine.ts` (`--check` compares), then rebuild kernels.wasm.
 */
import { fileURLToPath } from 'node:url';
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

function dot1(f: Bits): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  const mask = (1 << f.bits) - 1;
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
    const shift = f.bits * k;
    let lanes = shift === 0 ? '(local.get $v)' : `(i32x4.shr_u (local.get $v) (i32.const ${shift}))`;
    // the top element of a lane needs no mask (nothing above it)
    if (shift + f.bits < (f.bytes === 12 ? 24 : f.bytes === 4 ? 8 : 32)) lanes = `(v128.and ${lanes} ${splat(mask)})`;
    e(`          (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (f32x4.convert_i32x4_s ${lanes}) (v128.load offset=${16 * k} (local.get $xo)))))`);
  }
  e(`          (local.set $p (i32.add (local.get $p) (i32.const ${f.bytes})))`);
  e(`          (local.set $xo (i32.add (local.get $xo) (i32.const ${16 * f.e})))`);
  e(`          (br_if $cl (i32.lt_u (local.get $p) (local.get $ge))))`);
  e(`        ;; the group's scale and bias, in the weight's scale dtype`);
  e(`        (if (i32.eq (local.get $kind) (i32.const 2))`);
  e(`          (then`);
  e(`            (local.set $sc (f32.load (local.get $sp)))`);
  e(`            (local.set $bi (f32.load offset=4 (local.get $sp)))`);
  e(`            (local.set $sp (i32.add (local.get $sp) (i32.const 8))))`);
  e(`          (else`);
  e(`            (if (local.get $kind)`);
  e(`              (then`);
  e(`                (local.set $sc (f32.reinterpret_i32 (i32.shl (i32.load16_u (local.get $sp)) (i32.const 16))))`);
  e(`                (local.set $bi (f32.reinterpret_i32 (i32.shl (i32.load16_u offset=2 (local.get $sp)) (i32.const 16)))))`);
  e(`              (else`);
  e(`                (local.set $sc (f32.load offset=4096 (i32.shl (i32.load16_u (local.get $sp)) (i32.const 2))))`);
  e(`                (local.set $bi (f32.load offset=4096 (i32.shl (i32.load16_u offset=2 (local.get $sp)) (i32.const 2))))))`);
  e(`            (local.set $sp (i32.add (local.get $sp) (i32.const 4)))))`);
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

export function affineSection(): string {
  return HEADER + [...FORMATS.flatMap(dot1), ...prep()].join('\n');
}

export const AFFINE_SECTION: Section = { name: 'affine', script: 'affine.ts', text: affineSection };

export const withAffineSection = (wat: string) => withGenerated(wat, AFFINE_SECTION);

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) runGenerator(AFFINE_SECTION, process.argv);
