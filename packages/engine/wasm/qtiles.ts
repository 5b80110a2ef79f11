/**
 * Writes the q8_0/q4_0 prompt-batch section of kernels.wat (the functions between the `>>> qtile` and
 * `<<< qtile` markers): its 8 tile kernels are the same code for every tile size, unrolled, so they
 * are generated rather than written out by hand. `pnpm exec tsx packages/engine/wasm/qtiles.ts`
 * rewrites the section, then `pnpm --filter @orchard/engine build:wasm` rebuilds kernels.wasm;
 * `--check` fails when the section differs (test/wasm/fresh.test.ts runs the same comparison).
 */
import { fileURLToPath } from 'node:url';
import { type Section, runGenerator, withGenerated } from './sections.js';
import { bothVariants } from './variants.js';

/** Tokens per tile. */
export const T = 4;
/** k-steps per inner-loop iteration: one group (4 rows), two groups (8 rows). */
const STEPS = { 1: 2, 2: 1 } as const;


const HEADER = `  ;; ---------------------------------------------------------------- q8_0 / q4_0 prompt batches
  ;; Packed weights, n >= 2 tokens ($rows_packed): two 4-row groups at a time are widened once into the
  ;; calling thread's scratch ($qwiden32 each; a chunk's last odd group alone, $qwiden16), then tiles of
  ;; ${T} tokens run against them ($qtiles8 / $qtiles4; the last tile takes the 1-${T - 1} left), so each widened
  ;; weight vector is loaded once per ${T} tokens and each activation splat feeds both groups.
  ;; Widened block (32 columns): 16 i16x8 vectors, vector k holding columns 2k, 2k+1 of the group's 4 rows
  ;; (row r in i32 lane r), then the 4 rows' f32 scales d_w, widened exactly as the 1-token kernels do.
  ;; Two groups side by side: vector k of group A at 32k, of group B at 32k + 16, scales at 512 and 528
  ;; (544 bytes per block); one group: 16k and 256 (272 bytes).
  ;; One i32x4.dot_i16x8_s of vector k with the token's pair (x[2k], x[2k+1]) splatted adds 2 products to
  ;; each row's lane: 16 dots give the 4 rows' exact block totals, with no transpose. q8_0 widens as is;
  ;; q4_0 to match its activation form (quant_q8): column j < 16 carries b − 136 = (lo − 8) + 16·(hi − 8)
  ;; for the byte b = lo + 16·hi, column j + 16 carries hi − 8, against x[j] and x[j+16] − 16·x[j]: that is
  ;; (lo − 8)·x[j] + (hi − 8)·x[j+16], the −8 included (no correction term). Integer totals are exact, and
  ;; each block then adds f32(isum)·(d_w·d_x) to the f32 sum exactly as $g4_q8_0 / $g4_q4_0 do, so a batch
  ;; gives the 1-token results bit for bit.
  ;; Activations in tile layout (quant_tiles, once per matmul): tiles of ${T} tokens (the last: the rest); in
  ;; a tile of t tokens, per block 68·t bytes: for k < 16 each token's pair as one i32, then each token's
  ;; f32 d_x. One pointer with immediate offsets then addresses the whole tile.
  ;; Tile shape by measurement (1 thread, the ~100M bench model's 7 matrices at 64 tokens, hot, CPU
  ;; time; the 1-token kernels per token: 16.6 GMAC/s): 4 rows x 4 tokens with all 16 k-steps unrolled
  ;; ~15.7 (TurboFan hoisted every load to the top of the block and spilled most of them); with a k loop
  ;; of 2 steps 26 (4x2 23.5, 4x6 26, 4x8 20.6 and 4 steps per iteration 20: spills); 8 rows x 4 tokens
  ;; from the tile layout, 1 step per iteration, 33-34 (8x3 32-33, 8x2 with 2 steps 31-32, 8x4 with 2
  ;; steps 26.5, 8x5 25).
`;

const LO16 = '0 1 16 17 2 3 18 19 4 5 20 21 6 7 22 23';
const HI16 = '8 9 24 25 10 11 26 27 12 13 28 29 14 15 30 31';
const LO32 = '0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23';
const HI32 = '8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31';

/**
 * The 4 rows' 16 bytes in $r0..3 (then $h0..3) interleaved by 16, then by 32 bits: for each group of 4
 * bytes per row, `store(k, bytes, half)` gets the shuffled bytes (8 per row, as the tile kernels read the
 * pair vectors k and k + 1) and returns the lines that store them; $u, $v are scratch.
 */
export function interleaveRows4(ind: string, store: (k: number, bytes: string, half: 0 | 1) => string[]): string[] {
  const L: string[] = [];
  for (const [half, v] of [[0, 'r'], [1, 'h']] as const) {
    for (const [part, s16] of [[0, LO16], [1, HI16]] as const) {
      L.push(`${ind}(local.set $u (i8x16.shuffle ${s16} (local.get $${v}0) (local.get $${v}1)))`);
      L.push(`${ind}(local.set $v (i8x16.shuffle ${s16} (local.get $${v}2) (local.get $${v}3)))`);
      for (const [q, s32] of [[0, LO32], [1, HI32]] as const) L.push(...store(half * 8 + part * 4 + q * 2, `(i8x16.shuffle ${s32} (local.get $u) (local.get $v))`, half));
    }
  }
  return L;
}

/** The generated section, markers excluded. */
export function qtilesSection(): string {
  const L: string[] = [];
  const e = (s: string) => L.push(s);

  // ---- widen one packed group: vector k at d + k·ws, the 4 scales at d + 16·ws; blocks 17·ws apart
  for (const ws of [16, 32]) {
    e(`  ;; One packed group (w: its first block) widened for $qtile${ws / 4}x*: vector k at d + ${ws}k, scales at d + ${16 * ws};`);
    e(`  ;; blocks ${17 * ws} bytes apart. q4: 1 for q4_0 weights.`);
    e(`  (func $qwiden${ws} (param $w i32) (param $nb i32) (param $d i32) (param $q4 i32)`);
    e(`    (local $b i32) (local $m v128) (local $u v128) (local $v v128)`);
    e(`    (local $r0 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128) (local $h0 v128) (local $h1 v128) (local $h2 v128) (local $h3 v128)`);
    e(`    (local.set $m (v128.const i32x4 0x8FFFE000 0x8FFFE000 0x8FFFE000 0x8FFFE000))`);
    e(`    (block $done`);
    e(`      (loop $l`);
    e(`        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))`);
    e(`        (v128.store offset=${16 * ws} (local.get $d) (f32x4.mul`);
    e(`          (v128.and (i32x4.shr_s (i32x4.shl (v128.load16x4_u (local.get $w)) (i32.const 16)) (i32.const 3)) (local.get $m))`);
    e(`          (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112)))`);
    e(`        (if (local.get $q4)`);
    for (const q4 of [true, false]) {
      e(q4 ? `          (then` : `          (else`);
      const body: string[] = [];
      if (q4) {
        body.push(`            ;; row r's 16 bytes b (columns j < 16), then their high nibbles (columns j + 16)`);
        for (let r = 0; r < 4; r++) body.push(`            (local.set $r${r} (v128.load offset=${8 + 16 * r} (local.get $w)))`);
        for (let r = 0; r < 4; r++) body.push(`            (local.set $h${r} (i8x16.shr_u (local.get $r${r}) (i32.const 4)))`);
      } else {
        body.push(`            ;; row r's 32 int8: columns 0..15, 16..31`);
        for (let r = 0; r < 4; r++) body.push(`            (local.set $r${r} (v128.load offset=${8 + 32 * r} (local.get $w)))`);
        for (let r = 0; r < 4; r++) body.push(`            (local.set $h${r} (v128.load offset=${24 + 32 * r} (local.get $w)))`);
      }
      body.push(`            ;; pairs of the 4 rows interleaved: (row 0, row 1) and (row 2, row 3) by 16 bits, then by 32`);
      body.push(
        ...interleaveRows4('            ', (k, bytes, half) =>
          (['low', 'high'] as const).map((side, dk) => {
            const at = `offset=${ws * (k + dk)} (local.get $d)`;
            const c = half === 0 ? 136 : 8;
            return q4
              ? `            (v128.store ${at} (i16x8.sub (i16x8.extend_${side}_i8x16_u ${bytes}) (v128.const i16x8 ${Array(8).fill(c).join(' ')})))`
              : `            (v128.store ${at} (i16x8.extend_${side}_i8x16_s ${bytes}))`;
          }),
        ),
      );
      L.push(...(q4 ? bothVariants('            ', relaxedQ4Widen(ws), body) : body));
      e(`            (local.set $w (i32.add (local.get $w) (i32.const ${q4 ? 72 : 136})))${q4 ? ')' : '))'}`);
    }
    e(`        (local.set $d (i32.add (local.get $d) (i32.const ${17 * ws})))`);
    e(`        (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
    e(`        (br $l))))`);
    e(``);
  }

  L.push(...tileKernels('q', 16));
  L.push(...bothVariants('  ', relaxedQ4Tiles(), []));

  // ---- activations into the tile layout
  e(`  ;; n tokens of quant_q8 output at src (cols·2 + (cols/32)·8 bytes each) into tiles of ${T} tokens at dst.`);
  L.push(...tileActivationLoops('quant_tiles', '', [
    `            (local.set $k (i32.const 0))`,
    `            (block $kdone`,
    `              (loop $kl`,
    `                (br_if $kdone (i32.ge_u (local.get $k) (i32.const 16)))`,
    `                (local.set $t (i32.const 0))`,
    `                (block $idone`,
    `                  (loop $il`,
    `                    (br_if $idone (i32.ge_u (local.get $t) (local.get $tn)))`,
    `                    (i32.store (local.get $dst) (i32.load (i32.add`,
    `                      (i32.add (local.get $src) (i32.mul (i32.add (local.get $t0) (local.get $t)) (local.get $xs)))`,
    `                      (i32.add (i32.shl (local.get $b) (i32.const 6)) (i32.shl (local.get $k) (i32.const 2))))))`,
    `                    (local.set $dst (i32.add (local.get $dst) (i32.const 4)))`,
    `                    (local.set $t (i32.add (local.get $t) (i32.const 1)))`,
    `                    (br $il)))`,
    `                (local.set $k (i32.add (local.get $k) (i32.const 1)))`,
    `                (br $kl)))`,
    `            (local.set $t (i32.const 0))`,
    `            (block $ddone`,
    `              (loop $dl`,
    `                (br_if $ddone (i32.ge_u (local.get $t) (local.get $tn)))`,
    `                (f32.store (local.get $dst) (f32.load (i32.add`,
    `                  (i32.add (local.get $src) (i32.mul (i32.add (local.get $t0) (local.get $t)) (local.get $xs)))`,
    `                  (i32.add (i32.shl (local.get $cols) (i32.const 1)) (i32.shl (i32.add (local.get $nb) (local.get $b)) (i32.const 2))))))`,
    `                (local.set $dst (i32.add (local.get $dst) (i32.const 4)))`,
    `                (local.set $t (i32.add (local.get $t) (i32.const 1)))`,
    `                (br $dl)))`,
  ]));
  return HEADER + L.join('\n') + '\n';
}

/**
 * quant_tiles' loops over n tokens of quant_q8 output at $src ($xs bytes apart): tiles of ${T} tokens
 * ($t0 the first, $tn how many), each tile block by block ($b < $nb); `block` writes one block of the
 * tile at $dst and advances $dst. `locals`: the function's extra locals.
 */
function tileActivationLoops(name: string, locals: string, block: string[]): string[] {
  return [
    `  (func (export "${name}") (param $src i32) (param $dst i32) (param $cols i32) (param $n i32)`,
    `    (local $xs i32) (local $nb i32) (local $t0 i32) (local $tn i32) (local $b i32) (local $k i32) (local $t i32)${locals}`,
    `    (local.set $nb (i32.shr_u (local.get $cols) (i32.const 5)))`,
    `    (local.set $xs (i32.add (i32.shl (local.get $cols) (i32.const 1)) (i32.shl (local.get $nb) (i32.const 3))))`,
    `    (block $tdone`,
    `      (loop $tl`,
    `        (br_if $tdone (i32.ge_u (local.get $t0) (local.get $n)))`,
    `        (local.set $tn (i32.sub (local.get $n) (local.get $t0)))`,
    `        (if (i32.gt_u (local.get $tn) (i32.const ${T})) (then (local.set $tn (i32.const ${T}))))`,
    `        (local.set $b (i32.const 0))`,
    `        (block $bdone`,
    `          (loop $bl`,
    `            (br_if $bdone (i32.ge_u (local.get $b) (local.get $nb)))`,
    ...block,
    `            (local.set $b (i32.add (local.get $b) (i32.const 1)))`,
    `            (br $bl)))`,
    `        (local.set $t0 (i32.add (local.get $t0) (local.get $tn)))`,
    `        (br $tl))))`,
  ];
}

/**
 * A tile's inner loop (G 4-row groups, t tokens): per column pair one widened vector per group at $s and
 * one splatted activation pair per token at $x, an i32x4.dot_i16x8_s into $a<g><i>, until $x reaches $end.
 */
export function tileKLoop(ind: string, G: 1 | 2, t: number): string[] {
  const steps = STEPS[G];
  const ws = 16 * G;
  const L = [`${ind}(loop $kl`];
  for (let u = 0; u < steps; u++) {
    for (let g = 0; g < G; g++) L.push(`${ind}  (local.set $w${g} (v128.load offset=${ws * u + 16 * g} (local.get $s)))`);
    for (let i = 0; i < t; i++) {
      L.push(`${ind}  (local.set $c (v128.load32_splat offset=${4 * (u * t + i)} (local.get $x)))`);
      for (let g = 0; g < G; g++) L.push(`${ind}  (local.set $a${g}${i} (i32x4.add (local.get $a${g}${i}) (i32x4.dot_i16x8_s (local.get $w${g}) (local.get $c))))`);
    }
  }
  L.push(`${ind}  (local.set $s (i32.add (local.get $s) (i32.const ${ws * steps})))`);
  L.push(`${ind}  (local.set $x (i32.add (local.get $x) (i32.const ${4 * t * steps})))`);
  L.push(`${ind}  (br_if $kl (i32.lt_u (local.get $x) (local.get $end))))`);
  return L;
}

/** A tile of G 4-row groups and t tokens: group and token indices, and the accumulator suffixes `${g}${i}`. */
export function tileShape(G: 1 | 2, t: number): { gs: number[]; toks: number[]; acc: string[] } {
  const gs = [...Array(G).keys()];
  const toks = [...Array(t).keys()];
  return { gs, toks, acc: gs.flatMap((g) => toks.map((i) => `${g}${i}`)) };
}

/** A tile's results $f<g><i> stored: token i's 4·G rows at $out + i·$os. */
export function tileStores(G: 1 | 2, t: number): string[] {
  const L: string[] = [];
  for (let i = 0; i < t; i++) {
    if (i > 0) L.push(`    (local.set $out (i32.add (local.get $out) (local.get $os)))`);
    for (let g = 0; g < G; g++) L.push(`    (v128.store offset=${16 * g} (local.get $out) (local.get $f${g}${i}))`);
  }
  return L;
}

/**
 * A tile driver's body: `call(${T})` while ${T}+ tokens are left ($x advancing by `tileBytes`, $out by ${T}·$os),
 * then `call(t)` for the 1-${T - 1} left.
 */
export function tileRuns(call: (t: number) => string, tileBytes: string): string[] {
  const L = [
    `    (block $done`,
    `      (loop $l`,
    `        (br_if $done (i32.lt_u (local.get $n) (i32.const ${T})))`,
    `        ${call(T)}`,
    `        (local.set $x (i32.add (local.get $x) ${tileBytes}))`,
    `        (local.set $out (i32.add (local.get $out) (i32.mul (local.get $os) (i32.const ${T}))))`,
    `        (local.set $n (i32.sub (local.get $n) (i32.const ${T})))`,
    `        (br $l)))`,
  ];
  for (let t = 1; t < T; t++) L.push(`    (if (i32.eq (local.get $n) (i32.const ${t})) (then ${call(t)}))`);
  return L;
}

/**
 * The token-tile kernels `$<p>tile{4,8}x{1..${T}}` and `$<p>tiles{4,8}` over blocks of `pairs` column pairs
 * (16: the 32-weight blocks of q8_0/q4_0; 128: the 256-weight super-blocks of packed q4_k, wasm/kquants.ts):
 * per block an exact i32 total per row and token, then one f32 step f += f32(isum)·(d_w·d_x).
 */
export function tileKernels(p: string, pairs: number): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  for (const G of [1, 2] as const) {
    const ws = 16 * G;
    for (let t = 1; t <= T; t++) {
      const { gs, toks, acc } = tileShape(G, t);
      e(`  ;; ${4 * G} rows x ${t} token(s): s = widened blocks, x = the tile's activations; out + i·os: token i's ${4 * G} outputs.`);
      e(`  (func $${p}tile${4 * G}x${t} (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32)`);
      e(`    (local $b i32) (local $end i32)${gs.map((g) => ` (local $w${g} v128) (local $dw${g} v128)`).join('')} (local $c v128) (local $dx v128)`);
      e(`   ${acc.map((a) => ` (local $a${a} v128) (local $f${a} v128)`).join('')}`);
      e(`    (block $done`);
      e(`      (loop $l`);
      e(`        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))`);
      for (const a of acc) e(`        (local.set $a${a} (v128.const i32x4 0 0 0 0))`);
      e(`        (local.set $end (i32.add (local.get $x) (i32.const ${4 * pairs * t})))`);
      L.push(...tileKLoop('        ', G, t));
      for (const g of gs) e(`        (local.set $dw${g} (v128.load offset=${16 * g} (local.get $s)))`);
      for (const i of toks) {
        e(`        (local.set $dx (f32x4.splat (f32.load offset=${4 * i} (local.get $x))))`);
        for (const g of gs) {
          e(`        (local.set $f${g}${i} (f32x4.add (local.get $f${g}${i})`);
          e(`          (f32x4.mul (f32x4.convert_i32x4_s (local.get $a${g}${i})) (f32x4.mul (local.get $dw${g}) (local.get $dx)))))`);
        }
      }
      e(`        (local.set $s (i32.add (local.get $s) (i32.const ${ws})))`);
      e(`        (local.set $x (i32.add (local.get $x) (i32.const ${4 * t})))`);
      e(`        (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
      e(`        (br $l)))`);
      L.push(...tileStores(G, t));
      e(`  )`);
      e(``);
    }
    e(`  ;; All n tokens of the batch against ${4 * G} widened rows: tiles of ${T}, then one of the rest.`);
    e(`  (func $${p}tiles${4 * G} (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32) (param $n i32)`);
    L.push(...tileRuns((t) => `(call $${p}tile${4 * G}x${t} (local.get $s) (local.get $nb) (local.get $x) (local.get $out) (local.get $os))`, `(i32.mul (local.get $nb) (i32.const ${(4 * pairs + 4) * T}))`));
    e(`  )`);
    e(``);
  }

  return L;
}

/**
 * The relaxed build's q4_0 prompt batches (wasm/variants.ts): a widened block holds the 4-bit values
 * themselves (0..15, a valid i7 operand), vector k (k < 8) with columns 4k..4k+3 of the group's 4 rows
 * (row r in i32 lane r), then the 4 rows' f32 d_w at 8·ws; blocks stay 17·ws bytes apart (half used).
 * The activations' tile layout (quant_tiles_q4r) per block and tile of t tokens: for k < 8 each token's
 * x[4k..4k+3] as int8 in one i32, then each token's correction as two i16 (−8·Σx over the columns of the
 * even i16 lanes, c%4 in {0,1}, then of the odd ones), then its d_x.
 * One i16x8.relaxed_dot_i8x16_i7x16_s of vector k with a token's quad splatted adds 2 products to each
 * i16 lane (row r: lanes 2r, 2r+1). The accumulators start at the correction splatted, so after the 8
 * quads each lane holds Σ (nibble − 8)·x over its 16 columns, and every partial sum on the way is such a
 * sum over the columns done plus −8·x over those to come: within ±8·16·127 < 2^15, no i16 overflow. One
 * widening then gives each row's exact block total (the baseline's), so the same f32 steps and bits.
 * (Subtracting 8·Σx after the widening cost one load and one subtraction per row group and token.)
 */
function relaxedQ4Widen(ws: number): string[] {
  return [
    ...nibbleQuads('            ', (r) => 8 + 16 * r, (k) => ws * k),
    `            (v128.store offset=${8 * ws} (local.get $d) (v128.load offset=${16 * ws} (local.get $d)))`,
  ];
}

/**
 * 4 packed rows' 16 bytes (row r's at $w + `from(r)`: low nibbles columns 0..15, high nibbles 16..31)
 * as 8 vectors of the 4-bit values (vector k: columns 4k..4k+3, row r in i32 lane r) stored at
 * $d + `to(k)`: the relaxed build's widened q4_0 and q4_k blocks. Uses $r0..3, $h0..3, $u, $v.
 */
export function nibbleQuads(ind: string, from: (r: number) => number, to: (k: number) => number): string[] {
  const L: string[] = [];
  const m = '(v128.const i32x4 0x0f0f0f0f 0x0f0f0f0f 0x0f0f0f0f 0x0f0f0f0f)';
  for (let r = 0; r < 4; r++) L.push(`${ind}(local.set $h${r} (v128.load offset=${from(r)} (local.get $w)))`);
  for (let r = 0; r < 4; r++) L.push(`${ind}(local.set $r${r} (v128.and (local.get $h${r}) ${m}))`);
  for (let r = 0; r < 4; r++) L.push(`${ind}(local.set $h${r} (v128.and (i16x8.shr_u (local.get $h${r}) (i32.const 4)) ${m}))`);
  L.push(`${ind};; the 4 rows' 32-bit words transposed: vector k = word k of rows 0..3`);
  for (const [half, v] of [[0, 'r'], [1, 'h']] as const) {
    for (const [part, lo] of [[0, '0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23'], [1, '8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31']] as const) {
      L.push(`${ind}(local.set $u (i8x16.shuffle ${lo} (local.get $${v}0) (local.get $${v}1)))`);
      L.push(`${ind}(local.set $v (i8x16.shuffle ${lo} (local.get $${v}2) (local.get $${v}3)))`);
      const k = 4 * half + 2 * part;
      L.push(`${ind}(v128.store offset=${to(k)} (local.get $d) (i8x16.shuffle 0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23 (local.get $u) (local.get $v)))`);
      L.push(`${ind}(v128.store offset=${to(k + 1)} (local.get $d) (i8x16.shuffle 8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31 (local.get $u) (local.get $v)))`);
    }
  }
  return L;
}

/**
 * The relaxed tiles' inner loop over the 8 quads of one 32-column block (G 4-row groups, t tokens):
 * per quad one nibble vector per group at $s and one splatted int8 quad per token at $x, an
 * i16x8.relaxed_dot_i8x16_i7x16_s added into the i16 accumulators $a<g><i>, until $x reaches x + 32·t.
 */
export function relaxedKLoop(ind: string, G: 1 | 2, t: number): string[] {
  const ws = 16 * G;
  const steps = STEPS[G];
  const { gs, toks } = tileShape(G, t);
  const L = [`${ind}(local.set $end (i32.add (local.get $x) (i32.const ${32 * t})))`, `${ind}(loop $kl`];
  for (let u = 0; u < steps; u++) {
    for (const g of gs) L.push(`${ind}  (local.set $w${g} (v128.load offset=${ws * u + 16 * g} (local.get $s)))`);
    for (const i of toks) {
      L.push(`${ind}  (local.set $c (v128.load32_splat offset=${4 * (u * t + i)} (local.get $x)))`);
      for (const g of gs) L.push(`${ind}  (local.set $a${g}${i} (i16x8.add (local.get $a${g}${i}) (i16x8.relaxed_dot_i8x16_i7x16_s (local.get $c) (local.get $w${g}))))`);
    }
  }
  L.push(`${ind}  (local.set $s (i32.add (local.get $s) (i32.const ${ws * steps})))`);
  L.push(`${ind}  (local.set $x (i32.add (local.get $x) (i32.const ${4 * t * steps})))`);
  L.push(`${ind}  (br_if $kl (i32.lt_u (local.get $x) (local.get $end))))`);
  return L;
}

/**
 * The start of a relaxed tile kernel `$<name>` (G 4-row groups, t tokens) up to its block loop's test:
 * the i32 locals `ints` besides $b and $end, and per accumulator suffix the v128 locals `$<prefix><g><i>`.
 */
export function relaxedTileHead(name: string, G: 1 | 2, t: number, ints: string[], perAcc: string[], one = false): string[] {
  const { gs, acc } = tileShape(G, t);
  return [
    `  (func $${name} (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32)`,
    `    (local $b i32)${ints.map((v) => ` (local $${v} i32)`).join('')} (local $end i32)${gs.map((g) => ` (local $w${g} v128) (local $dw${g} v128)`).join('')} (local $c v128) (local $dx v128)${one ? ' (local $one v128)' : ''}`,
    `   ${acc.map((a) => perAcc.map((p) => ` (local $${p}${a} v128)`).join('')).join('')}`,
    // i16 pairs summed by a dot with ones: extadd_pairwise's bits, with its constant in a register or
    // the stack instead of an address V8 reloads before every use
    ...(one ? [`    (local.set $one (v128.const i16x8 1 1 1 1 1 1 1 1))`] : []),
    `    (block $done`,
    `      (loop $l`,
    `        (br_if $done (i32.ge_u (local.get $b) (local.get $nb)))`,
  ];
}

/** The end of a relaxed tile kernel's block loop ($s, $x stepped to the next block) and its stores. */
export function relaxedTileEnd(G: 1 | 2, t: number, sStep: number, xStep: number): string[] {
  return [
    `        (local.set $s (i32.add (local.get $s) (i32.const ${sStep})))`,
    `        (local.set $x (i32.add (local.get $x) (i32.const ${xStep})))`,
    `        (local.set $b (i32.add (local.get $b) (i32.const 1)))`,
    `        (br $l)))`,
    ...tileStores(G, t),
    `  )`,
    ``,
  ];
}

/** A relaxed tile driver `$<name>` over the kernels `$<tile>x1..T` (tiles of T tokens, `blockBytes` per token and block). */
export function relaxedTileDriver(name: string, tile: string, blockBytes: number): string[] {
  return [
    `  (func $${name} (param $s i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32) (param $n i32)`,
    ...tileRuns((t) => `(call $${tile}x${t} (local.get $s) (local.get $nb) (local.get $x) (local.get $out) (local.get $os))`, `(i32.mul (local.get $nb) (i32.const ${blockBytes * T}))`),
    `  )`,
    ``,
  ];
}

/** The relaxed q4_0 tile kernels $qrtile{4,8}x{1..T}, their drivers $qrtiles{4,8} and quant_tiles_q4r. */
function relaxedQ4Tiles(): string[] {
  const L: string[] = [];
  const e = (s: string) => L.push(s);
  for (const G of [1, 2] as const) {
    const ws = 16 * G;
    for (let t = 1; t <= T; t++) {
      const { gs, toks, acc } = tileShape(G, t);
      L.push(...relaxedTileHead(`qrtile${4 * G}x${t}`, G, t, [], ['a', 'f'], true));
      // each token's accumulators start at its correction (the same for every row and both groups)
      for (const i of toks) e(`        (local.set $a0${i} (v128.load32_splat offset=${32 * t + 4 * i} (local.get $x)))`);
      if (G === 2) for (const i of toks) e(`        (local.set $a1${i} (local.get $a0${i}))`);
      L.push(...relaxedKLoop('        ', G, t));
      for (const g of gs) e(`        (local.set $dw${g} (v128.load offset=${16 * g} (local.get $s)))`);
      for (const i of toks) {
        e(`        (local.set $dx (f32x4.splat (f32.load offset=${4 * (t + i)} (local.get $x))))`);
        for (const g of gs) {
          e(`        (local.set $f${g}${i} (f32x4.add (local.get $f${g}${i})`);
          e(`          (f32x4.mul (f32x4.convert_i32x4_s (i32x4.dot_i16x8_s (local.get $a${g}${i}) (local.get $one)))`);
          e(`            (f32x4.mul (local.get $dw${g}) (local.get $dx)))))`);
        }
      }
      L.push(...relaxedTileEnd(G, t, 9 * ws, 8 * t));
    }
    L.push(...relaxedTileDriver(`qrtiles${4 * G}`, `qrtile${4 * G}`, 40));
  }
  e(`  ;; n tokens of quant_q8's q4_0 output at src into the relaxed q4_0 tile layout at dst (see $qrtile*).`);
  L.push(...tileActivationLoops('quant_tiles_q4r', ' (local $p i32) (local $o i32) (local $v0 v128) (local $v1 v128) (local $lo v128) (local $hi v128)', [
    `            (local.set $t (i32.const 0))`,
    `            (block $idone`,
    `              (loop $il`,
    `                (br_if $idone (i32.ge_u (local.get $t) (local.get $tn)))`,
    `                ;; token t0 + t: its block's plain int8 x (the high half back from the q4 form x[j+16] − 16·x[j])`,
    `                (local.set $p (i32.add (local.get $src) (i32.mul (i32.add (local.get $t0) (local.get $t)) (local.get $xs))))`,
    `                (local.set $o (i32.add (local.get $p) (i32.shl (local.get $b) (i32.const 6))))`,
    `                (local.set $v0 (v128.load offset=0 (local.get $o)))`,
    `                (local.set $v1 (v128.load offset=16 (local.get $o)))`,
    `                (local.set $lo (i8x16.narrow_i16x8_s (local.get $v0) (local.get $v1)))`,
    `                (local.set $hi (i8x16.narrow_i16x8_s (i16x8.add (v128.load offset=32 (local.get $o)) (i16x8.shl (local.get $v0) (i32.const 4)))`,
    `                                                     (i16x8.add (v128.load offset=48 (local.get $o)) (i16x8.shl (local.get $v1) (i32.const 4)))))`,
    `                (local.set $o (i32.add (local.get $dst) (i32.shl (local.get $t) (i32.const 2))))`,
    ...[0, 1, 2, 3, 4, 5, 6, 7].map((k) => {
      const [v, lane] = k < 4 ? ['lo', k] : ['hi', k - 4];
      return `                (i32.store (i32.add (local.get $o) (i32.mul (local.get $tn) (i32.const ${4 * k}))) (i32x4.extract_lane ${lane} (local.get $${v})))`;
    }),
    `                ;; the correction as the accumulators' start: i16 −8·Σ x[c] over c%4 in {0,1} (the even i16 lanes' columns),`,
    `                ;; then over c%4 in {2,3} (the odd lanes'); pairs of columns summed, then lanes 4-7 onto 0-3, 2-3 onto 0-1`,
    `                (local.set $v0 (i16x8.add (i16x8.extadd_pairwise_i8x16_s (local.get $lo)) (i16x8.extadd_pairwise_i8x16_s (local.get $hi))))`,
    `                (local.set $v0 (i16x8.add (local.get $v0) (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 (local.get $v0) (local.get $v0))))`,
    `                (local.set $v0 (i16x8.add (local.get $v0) (i8x16.shuffle 4 5 6 7 0 1 2 3 4 5 6 7 0 1 2 3 (local.get $v0) (local.get $v0))))`,
    `                (i32.store (i32.add (local.get $o) (i32.shl (local.get $tn) (i32.const 5)))`,
    `                  (i32x4.extract_lane 0 (i16x8.mul (local.get $v0) (v128.const i16x8 -8 -8 -8 -8 -8 -8 -8 -8))))`,
    `                ;; then d_x`,
    `                (local.set $p (i32.add (local.get $p) (i32.add (i32.shl (local.get $cols) (i32.const 1)) (i32.shl (local.get $b) (i32.const 2)))))`,
    `                (f32.store (i32.add (local.get $o) (i32.mul (local.get $tn) (i32.const 36))) (f32.load (i32.add (local.get $p) (i32.shl (local.get $nb) (i32.const 2)))))`,
    `                (local.set $t (i32.add (local.get $t) (i32.const 1)))`,
    `                (br $il)))`,
    `            (local.set $dst (i32.add (local.get $dst) (i32.mul (local.get $tn) (i32.const 40))))`,
  ]));
  e(``);
  return L;
}

/**
 * Rows r0..r3's i16x8 of 8 consecutive columns ($r0..$r3, or $<src>0..3: 4 column pairs each) transposed
 * as 4×4 i32 and stored as the column-pair vectors `pair`..`pair` + 3 of the widened layout at $o (vector
 * k at ws·k).
 */
export function transposeStore4(ws: number, pair: number, ind: string, src = 'r'): string[] {
  const lo = '0 1 2 3 16 17 18 19 4 5 6 7 20 21 22 23';
  const hi = '8 9 10 11 24 25 26 27 12 13 14 15 28 29 30 31';
  const first = '0 1 2 3 4 5 6 7 16 17 18 19 20 21 22 23';
  const second = '8 9 10 11 12 13 14 15 24 25 26 27 28 29 30 31';
  return [
    `${ind}(local.set $t0 (i8x16.shuffle ${lo} (local.get $${src}0) (local.get $${src}1)))`,
    `${ind}(local.set $t1 (i8x16.shuffle ${lo} (local.get $${src}2) (local.get $${src}3)))`,
    `${ind}(local.set $t2 (i8x16.shuffle ${hi} (local.get $${src}0) (local.get $${src}1)))`,
    `${ind}(local.set $t3 (i8x16.shuffle ${hi} (local.get $${src}2) (local.get $${src}3)))`,
    `${ind}(v128.store offset=${ws * pair} (local.get $o) (i8x16.shuffle ${first} (local.get $t0) (local.get $t1)))`,
    `${ind}(v128.store offset=${ws * (pair + 1)} (local.get $o) (i8x16.shuffle ${second} (local.get $t0) (local.get $t1)))`,
    `${ind}(v128.store offset=${ws * (pair + 2)} (local.get $o) (i8x16.shuffle ${first} (local.get $t2) (local.get $t3)))`,
    `${ind}(v128.store offset=${ws * (pair + 3)} (local.get $o) (i8x16.shuffle ${second} (local.get $t2) (local.get $t3)))`,
  ];
}

/**
 * The driver of a row-major format's prompt batches over rows [r0, r1): 8 rows at a time (two groups
 * widened side by side, ws 32), then 4 (ws 16), each followed by its tiles and `after` (per 4-row group:
 * its row pointer and first row); returns the first row left, for the 1-token kernels. `widen(ws, w, d)`
 * and `tiles(rows)` are the format's calls; locals $out $w $x $rows $cols $n $rb $xs $r $wr $scr are in scope.
 */
export function tiledRowsDriver(o: {
  name: string;
  comment: string;
  widen: (ws: number, w: string, d: string) => string;
  tiles: (rows: number) => string;
  after?: (wr: string, r: string) => string[];
}): string[] {
  const after = o.after ?? (() => []);
  const second = '(i32.add (local.get $wr) (i32.shl (local.get $rb) (i32.const 2)))';
  return [
    `  ;; ${o.comment}`,
    `  (func $${o.name} (param $out i32) (param $w i32) (param $x i32) (param $rows i32) (param $cols i32) (param $n i32) (param $rb i32)`,
    `                 (param $xs i32) (param $r0 i32) (param $r1 i32) (param $tid i32) (result i32)`,
    `    (local $r i32) (local $wr i32) (local $scr i32)`,
    `    (local.set $scr (i32.add (i32.load offset=192 (i32.const 0)) (i32.mul (local.get $tid) (i32.load offset=196 (i32.const 0)))))`,
    `    (local.set $r (local.get $r0))`,
    `    (block $done`,
    `      (loop $l`,
    `        (br_if $done (i32.gt_u (i32.add (local.get $r) (i32.const 8)) (local.get $r1)))`,
    `        (local.set $wr (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))))`,
    `        ${o.widen(32, '(local.get $wr)', '(local.get $scr)')}`,
    `        ${o.widen(32, second, '(i32.add (local.get $scr) (i32.const 16))')}`,
    `        ${o.tiles(8)}`,
    ...after('(local.get $wr)', '(local.get $r)'),
    ...after(second, '(i32.add (local.get $r) (i32.const 4))'),
    `        (local.set $r (i32.add (local.get $r) (i32.const 8)))`,
    `        (br $l)))`,
    `    (if (i32.le_u (i32.add (local.get $r) (i32.const 4)) (local.get $r1))`,
    `      (then`,
    `        (local.set $wr (i32.add (local.get $w) (i32.mul (local.get $r) (local.get $rb))))`,
    `        ${o.widen(16, '(local.get $wr)', '(local.get $scr)')}`,
    `        ${o.tiles(4)}`,
    ...after('(local.get $wr)', '(local.get $r)'),
    `        (local.set $r (i32.add (local.get $r) (i32.const 4)))))`,
    `    (local.get $r))`,
    ``,
  ];
}

export const QTILE_SECTION: Section = { name: 'qtile', script: 'qtiles.ts', text: qtilesSection };

/** kernels.wat's text with the section between the markers regenerated. */
export function withSection(wat: string): string {
  return withGenerated(wat, QTILE_SECTION);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) runGenerator(QTILE_SECTION, process.argv);
