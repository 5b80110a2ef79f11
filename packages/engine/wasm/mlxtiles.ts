/**
 * Prompt-batch kernels of packed 4-bit MLX weights (part of the affine section of kernels.wat, written by
 * wasm/affine.ts): the q8_0/q4_0 tile idea (qtiles.ts) with MLX's two-level sum. Each 4-row group is
 * widened once per matmul into i16 column pairs; then tiles of 4 tokens run against one or two widened
 * groups, so each widened weight vector is loaded once per 4 tokens instead of being unpacked per token.
 */
import { T, interleaveRows4, tileKLoop, tileRuns, tileShape, tileStores } from './qtiles.js';

const HEADER = `  ;; Packed 4-bit MLX prompt batches (n >= 2 tokens, $rows_packed): two 4-row groups at a time widened into
  ;; the thread's scratch ($mwiden32 each; a chunk's last odd group alone, $mwiden16), then tiles of ${T} tokens
  ;; ($mtiles8 / $mtiles4; the last tile takes the 1-${T - 1} left).
  ;; Widened, per MLX group: per 32-column block 16 i16x8 vectors, vector k holding in i32 lane r row r's
  ;; pair of nibbles that quant_mlx4's i32 k of the block multiplies (k < 8: half h = 0, k >= 8: h = 1; m = k & 3;
  ;; (k & 7) < 4: columns 16h + 4m and 16h + 4m + 2, else 16h + 4m + 1 and 16h + 4m + 3); after the group's
  ;; blocks the 4 rows' f32 scales, then biases, widened as $g4_mlx4 widens them. Two groups side by side:
  ;; vector k of group A at 32k, of B at 32k + 16, scales at 0 / 16, biases at 32 / 48 past the blocks.
  ;; Activations in tile layout (mlxTiles in backend.ts): tiles of ${T} tokens (the last: the rest); in a tile
  ;; of t tokens, per MLX group: per block 16 x t i32 (quant_mlx4's pairs, k-major); then t f32 d_x; then t
  ;; f32 group sums of x. Per group one exact i32 total per row and token, then the f32 steps of $g4_mlx4
  ;; in its order (gacc = f32(total)·d_x; acc += scale·gacc + bias·Σx), so a batch gives the 1-token bits.
`;

const I32 = (v: string) => `(v128.const i32x4 ${v} ${v} ${v} ${v})`;
const F16 = (v: string) => `(f32x4.mul (v128.and ${v} ${I32('0x8FFFE000')}) (v128.const f32x4 0x1p112 0x1p112 0x1p112 0x1p112))`;

/**
 * Lines setting $sc and $bi (lane r: row r's scale and bias as f32) from the 4 (scale, bias) pairs at $p in
 * the scale dtype $kind (0 f16, 1 bf16, 2 f32), and moving $p past them; $v is scratch. f16 widens with
 * integer ops to the f32 bits of h·2^-112, then one multiply by 2^112 (exact for normal values).
 */
export function scaleBias4(ind: string): string[] {
  return [
    `${ind}(if (i32.eq (local.get $kind) (i32.const 2))`,
    `${ind}  (then`,
    `${ind}    (local.set $sc (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (v128.load (local.get $p)) (v128.load offset=16 (local.get $p))))`,
    `${ind}    (local.set $bi (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (v128.load (local.get $p)) (v128.load offset=16 (local.get $p))))`,
    `${ind}    (local.set $p (i32.add (local.get $p) (i32.const 32))))`,
    `${ind}  (else`,
    `${ind}    (local.set $v (v128.load (local.get $p)))`,
    `${ind}    (if (local.get $kind)`,
    `${ind}      (then`,
    `${ind}        (local.set $sc (i32x4.shl (local.get $v) (i32.const 16)))`,
    `${ind}        (local.set $bi (v128.and (local.get $v) ${I32('0xFFFF0000')})))`,
    `${ind}      (else`,
    `${ind}        (local.set $sc ${F16('(i32x4.shr_s (i32x4.shl (local.get $v) (i32.const 16)) (i32.const 3))')})`,
    `${ind}        (local.set $bi ${F16('(i32x4.shr_s (local.get $v) (i32.const 3))')})))`,
    `${ind}    (local.set $p (i32.add (local.get $p) (i32.const 16)))))`,
  ];
}

/** The section's lines. */
export function mlxTiles(): string[] {
  const L: string[] = [HEADER];
  const e = (s: string) => L.push(s);

  for (const ws of [16, 32]) {
    e(`  ;; One packed 4-bit 4-row group (p: its start) widened for $mtile${ws / 4}x*: vector k of a block at d + ${ws}k,`);
    e(`  ;; blocks ${16 * ws} bytes apart, each MLX group's scales and biases at d + 0 / ${ws} past its blocks.`);
    e(`  (func $mwiden${ws} (param $p i32) (param $cols i32) (param $d i32)`);
    e(`    (local $end i32) (local $ge i32) (local $gb i32) (local $kind i32) (local $u v128) (local $v v128) (local $sc v128) (local $bi v128)`);
    e(`    (local $r0 v128) (local $r1 v128) (local $r2 v128) (local $r3 v128) (local $h0 v128) (local $h1 v128) (local $h2 v128) (local $h3 v128)`);
    e(`    (local.set $gb (i32.shl (i32.load offset=212 (i32.const 0)) (i32.const 1)))`);
    e(`    (local.set $kind (i32.load offset=216 (i32.const 0)))`);
    e(`    (local.set $end (i32.add (local.get $p) (call $mlx4_group_bytes (local.get $cols) (local.get $kind))))`);
    e(`    (block $done`);
    e(`      (loop $l`);
    e(`        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))`);
    L.push(...scaleBias4('        '));
    e(`        (local.set $ge (i32.add (local.get $p) (local.get $gb)))`);
    e(`        (loop $bl`);
    e(`          ;; row r's 16 bytes: low nibbles (even columns), high nibbles (odd columns)`);
    for (let r = 0; r < 4; r++) e(`          (local.set $h${r} (v128.load offset=${16 * r} (local.get $p)))`);
    for (let r = 0; r < 4; r++) e(`          (local.set $r${r} (v128.and (local.get $h${r}) (v128.const i8x16 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15 15)))`);
    for (let r = 0; r < 4; r++) e(`          (local.set $h${r} (i8x16.shr_u (local.get $h${r}) (i32.const 4)))`);
    // interleaveRows4 hands byte pairs jj, jj + 1 (jj = 4·part + 2q) of the 4 rows; their low nibbles are
    // vectors 8·part + 2q (+1), their high nibbles 8·part + 4 + 2q (+1)
    L.push(
      ...interleaveRows4('          ', (kk, bytes, half) => {
        const part = (kk >> 2) & 1;
        const q = (kk >> 1) & 1;
        const k = 8 * part + 4 * half + 2 * q;
        return (['low', 'high'] as const).map((side, dk) => `          (v128.store offset=${ws * (k + dk)} (local.get $d) (i16x8.extend_${side}_i8x16_u ${bytes}))`);
      }),
    );
    e(`          (local.set $p (i32.add (local.get $p) (i32.const 64)))`);
    e(`          (local.set $d (i32.add (local.get $d) (i32.const ${16 * ws})))`);
    e(`          (br_if $bl (i32.lt_u (local.get $p) (local.get $ge))))`);
    e(`        (v128.store (local.get $d) (local.get $sc))`);
    e(`        (v128.store offset=${ws} (local.get $d) (local.get $bi))`);
    e(`        (local.set $d (i32.add (local.get $d) (i32.const ${2 * ws})))`);
    e(`        (br $l))))`);
    e(``);
  }

  for (const G of [1, 2] as const) {
    const ws = 16 * G;
    for (let t = 1; t <= T; t++) {
      const { gs, toks, acc } = tileShape(G, t);
      e(`  ;; ${4 * G} rows x ${t} token(s): s = widened groups, x = the tile's activations; out + i·os: token i's ${4 * G} outputs.`);
      e(`  (func $mtile${4 * G}x${t} (param $s i32) (param $ng i32) (param $nb i32) (param $x i32) (param $out i32) (param $os i32)`);
      e(`    (local $g i32) (local $b i32) (local $end i32)${gs.map((g) => ` (local $w${g} v128)`).join('')} (local $c v128) (local $dx v128)`);
      e(`   ${acc.map((a) => ` (local $a${a} v128) (local $q${a} v128) (local $f${a} v128)`).join('')}`);
      e(`    (block $done`);
      e(`      (loop $l`);
      e(`        (br_if $done (i32.ge_u (local.get $g) (local.get $ng)))`);
      for (const a of acc) e(`        (local.set $a${a} (v128.const i32x4 0 0 0 0))`);
      e(`        (local.set $b (i32.const 0))`);
      e(`        (loop $bl`);
      e(`          (local.set $end (i32.add (local.get $x) (i32.const ${64 * t})))`);
      L.push(...tileKLoop('          ', G, t));
      e(`          (local.set $b (i32.add (local.get $b) (i32.const 1)))`);
      e(`          (br_if $bl (i32.lt_u (local.get $b) (local.get $nb))))`);
      e(`        ;; the group's exact totals times d_x, as $g4_mlx4`);
      for (const i of toks) {
        e(`        (local.set $dx (f32x4.splat (f32.load offset=${4 * i} (local.get $x))))`);
        for (const g of gs) e(`        (local.set $q${g}${i} (f32x4.mul (f32x4.convert_i32x4_s (local.get $a${g}${i})) (local.get $dx)))`);
      }
      e(`        (local.set $x (i32.add (local.get $x) (i32.const ${4 * t})))`);
      e(`        ;; the group: acc += scale·gacc + bias·Σx, as $g4_mlx4`);
      for (const i of toks) {
        e(`        (local.set $dx (f32x4.splat (f32.load offset=${4 * i} (local.get $x))))`);
        for (const g of gs) {
          e(`        (local.set $f${g}${i} (f32x4.add (local.get $f${g}${i}) (f32x4.add (f32x4.mul (v128.load offset=${16 * g} (local.get $s)) (local.get $q${g}${i}))`);
          e(`          (f32x4.mul (v128.load offset=${ws + 16 * g} (local.get $s)) (local.get $dx)))))`);
        }
      }
      e(`        (local.set $s (i32.add (local.get $s) (i32.const ${2 * ws})))`);
      e(`        (local.set $x (i32.add (local.get $x) (i32.const ${4 * t})))`);
      e(`        (local.set $g (i32.add (local.get $g) (i32.const 1)))`);
      e(`        (br $l)))`);
      L.push(...tileStores(G, t));
      e(`  )`);
      e(``);
    }
    e(`  ;; All n tokens of the batch against ${4 * G} widened rows (cols columns): tiles of ${T}, then one of the rest.`);
    e(`  (func $mtiles${4 * G} (param $s i32) (param $cols i32) (param $x i32) (param $out i32) (param $os i32) (param $n i32)`);
    e(`    (local $ng i32) (local $nb i32)`);
    e(`    (local.set $nb (i32.shr_u (i32.load offset=212 (i32.const 0)) (i32.const 5)))`);
    e(`    (local.set $ng (i32.div_u (local.get $cols) (i32.load offset=212 (i32.const 0))))`);
    // a tile of T tokens: per group (64·nb + 8)·T bytes
    L.push(...tileRuns((t) => `(call $mtile${4 * G}x${t} (local.get $s) (local.get $ng) (local.get $nb) (local.get $x) (local.get $out) (local.get $os))`,
      `(i32.mul (local.get $ng) (i32.mul (i32.add (i32.mul (local.get $nb) (i32.const 64)) (i32.const 8)) (i32.const ${T})))`));
    e(`  )`);
    e(``);
  }
  return L;
}
