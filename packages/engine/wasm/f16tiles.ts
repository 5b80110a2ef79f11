/**
 * Writes the f16 small-batch section of kernels.wat (between the `>>> f16tile` and `<<< f16tile`
 * markers): `$g{R}x{T}_f16` (R rows x T tokens: 4x2, 2x3, 2x4), the same code unrolled per shape.
 * `pnpm exec tsx packages/engine/wasm/f16tiles.ts` rewrites the section, then
 * `pnpm --filter @orchard/engine build:wasm` rebuilds kernels.wasm; `--check` fails when the section
 * differs (test/wasm/fresh.test.ts runs the same comparison).
 */
import { fileURLToPath } from 'node:url';
import { type Section, runGenerator, withGenerated } from './sections.js';

/** Token counts with a kernel; $rows_packed runs 4-token passes, then one kernel for the 1-3 left (1: $g4_f16). */
const KERNELS = [[4, 2], [2, 3], [2, 4]] as const;

const HEADER = `  ;; ---------------------------------------------------------------- f16 small batches
  ;; Packed f16, 2..4 tokens (batched decode, speculative verification; $rows_packed): each 4-row group
  ;; is read straight from the packed layout and every 16-byte weight load is widened once in registers
  ;; (the $g4_f16 integer ops) for several tokens: 4-token passes over each row pair ($g2x4_f16), then
  ;; the 2 or 3 tokens left ($g4x2_f16, $g2x3_f16; a last single token: $g4_f16). No scratch round trip;
  ;; from 5 tokens on the widened-scratch path ($widen4_f16) takes over (faster there). Register budget (16 SIMD
  ;; registers): 2 rows x T tokens keeps both rows' widened vectors and one token's activations live;
  ;; 4 rows x 2 tokens keeps both tokens' activations and one row's widened vectors live.
  ;; Per row and token the arithmetic of $g4_f16 (same lanes, same order, same bits).
  ;; $j: the first row of the group at $w (0 or 2 for 2-row kernels, 0 for 4-row ones); token t's
  ;; prepared activations at $x + t·$xs; row j + r's output for token t at $out + 4·(j + r) + t·$os.
`;

const C16 = '(v128.const i16x8 8192 0 8192 0 8192 0 8192 0)';
const MASK = '(v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000)';

function kernel(R: 2 | 4, T: number, e: (s: string) => void): void {
  const ts = [...Array(T).keys()];
  const rs = [...Array(R).keys()];
  const xp = (t: number) => (t === 0 ? '$x' : `$x${t}`);
  e(`  (func $g${R}x${T}_f16 (param $w i32) (param $cols i32) (param $j i32) (param $x i32) (param $xs i32) (param $out i32) (param $os i32)`);
  e(`    (local $p i32) (local $o i32) (local $end i32) (local $tail i32) (local $t i32) (local $c i32)${ts.slice(1).map((t) => ` (local ${xp(t)} i32)`).join('')}`);
  e(`   ${ts.map((t) => rs.map((r) => ` (local $a${t}${r} v128)`).join('')).join('')}`);
  e(`   ${rs.map((r) => ` (local $e${r} v128) (local $d${r} v128)`).join('')}${ts.map((t) => ` (local $xe${t} v128) (local $xd${t} v128)`).join('')}`);
  e(`   ${ts.map((t) => rs.map((r) => ` (local $s${t}${r} f32)`).join('')).join('')} (local $y f32)${rs.map((r) => ` (local $w${r} f32)`).join('')}`);
  for (const t of ts.slice(1)) e(`    (local.set ${xp(t)} (i32.add (local.get ${xp(t - 1)}) (local.get $xs)))`);
  e(`    (local.set $end (i32.shl (i32.and (local.get $cols) (i32.const -8)) (i32.const 2)))`);
  e(`    (local.set $tail (i32.shl (i32.and (local.get $cols) (i32.const 7)) (i32.const 1)))`);
  e(`    (local.set $p (i32.add (local.get $w) (i32.shl (local.get $j) (i32.const 4))))`);
  e(`    (block $done`);
  e(`      (loop $l`);
  e(`        (br_if $done (i32.ge_u (local.get $o) (local.get $end)))`);
  const widen = (r: number) => {
    e(`        (local.set $e${r} (v128.and (i32x4.dot_i16x8_s (v128.load offset=${16 * r} (local.get $p)) ${C16}) ${MASK}))`);
    e(`        (local.set $d${r} (v128.and (i32x4.shr_s (v128.load offset=${16 * r} (local.get $p)) (i32.const 3)) ${MASK}))`);
  };
  const loadX = (t: number) => {
    e(`        (local.set $xe${t} (v128.load offset=0 (i32.add (local.get ${xp(t)}) (local.get $o))))`);
    e(`        (local.set $xd${t} (v128.load offset=16 (i32.add (local.get ${xp(t)}) (local.get $o))))`);
  };
  const fma = (t: number, r: number) =>
    e(`        (local.set $a${t}${r} (f32x4.muladd2 (local.get $a${t}${r}) (local.get $e${r}) (local.get $xe${t}) (local.get $d${r}) (local.get $xd${t})))`);
  if (R === 2) {
    // both rows widened first, then token by token (one token's activations live at a time)
    rs.forEach(widen);
    for (const t of ts) {
      loadX(t);
      for (const r of rs) fma(t, r);
    }
  } else {
    // every token's activations first, then row by row (one row's widened vectors live at a time)
    ts.forEach(loadX);
    for (const r of rs) {
      widen(r);
      for (const t of ts) fma(t, r);
    }
  }
  e(`        (local.set $p (i32.add (local.get $p) (i32.const 64)))`);
  e(`        (local.set $o (i32.add (local.get $o) (i32.const 32)))`);
  e(`        (br $l)))`);
  // The lanes' sum: written in place after the 4x2 kernel's loop (2 tokens 10.5-10.8 -> 11.5 GMAC/s on the demo
  // model's shapes), called after the 2-row kernels' (in place, V8 kept fewer accumulators in registers in their
  // loops: 3-4 tokens 13.3-16.0 -> 12.0-13.3 GMAC/s)
  const lanesum = (v: string) => (R === 4 ? `(f32x4.lanesum (local.get ${v}))` : `(call $hsum (local.get ${v}))`);
  for (const t of ts) for (const r of rs) e(`    (local.set $s${t}${r} (f32.mul ${lanesum(`$a${t}${r}`)} (f32.const 0x1p48)))`);
  e(`    ;; tail columns (unscaled f32 activations): row j's f16 at the group's dense end + j·tail, as in $g4_f16`);
  e(`    (local.set $p (i32.add (i32.sub (local.get $p) (i32.shl (local.get $j) (i32.const 4))) (i32.mul (local.get $j) (local.get $tail))))`);
  e(`    (block $tdone`);
  e(`      (loop $tl`);
  e(`        (br_if $tdone (i32.ge_u (local.get $c) (local.get $tail)))`);
  e(`        (local.set $t (i32.add (local.get $p) (local.get $c)))`);
  for (const r of rs) {
    if (r > 0) e(`        (local.set $t (i32.add (local.get $t) (local.get $tail)))`);
    e(`        (local.set $w${r} (f32.load offset=4096 (i32.shl (i32.load16_u (local.get $t)) (i32.const 2))))`);
  }
  for (const t of ts) {
    e(`        (local.set $y (f32.load (i32.add (i32.add (local.get ${xp(t)}) (local.get $o)) (i32.shl (local.get $c) (i32.const 1)))))`);
    for (const r of rs) e(`        (local.set $s${t}${r} (f32.add (local.get $s${t}${r}) (f32.mul (local.get $w${r}) (local.get $y))))`);
  }
  e(`        (local.set $c (i32.add (local.get $c) (i32.const 2)))`);
  e(`        (br $tl)))`);
  e(`    (local.set $out (i32.add (local.get $out) (i32.shl (local.get $j) (i32.const 2))))`);
  for (const t of ts) {
    if (t > 0) e(`    (local.set $out (i32.add (local.get $out) (local.get $os)))`);
    for (const r of rs) e(`    (f32.store offset=${4 * r} (local.get $out) (local.get $s${t}${r}))`);
  }
  e(`  )`);
  e(``);
}

function f16tilesSection(): string {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  e(HEADER);
  for (const [R, T] of KERNELS) kernel(R, T, e);
  return L.join('\n');
}

export const F16TILE_SECTION: Section = { name: 'f16tile', script: 'f16tiles.ts', text: f16tilesSection };

/** kernels.wat's text with the section between the markers regenerated. */
export function withF16Section(wat: string): string {
  return withGenerated(wat, F16TILE_SECTION);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) runGenerator(F16TILE_SECTION, process.argv);
