/**
 * The prompt-batch (prefill) matmul: OUT[t, r] = Σ_k W[r, k] · X[t, k] for M tokens × N weight rows ×
 * K columns, tiled through workgroup memory with a register block per invocation. Layout and the
 * reasons for it: README.md ("Prefill matmul").
 */
import type { DType } from '../backend.js';
import { Q4K_SUB_BLOCK, STEP, WEIGHT_HEADER, stepDecoder, vectorWidth, weightAccessor } from './wgsl.js';

/** Columns (K) staged per tile: one GGUF block, four 16-byte f16 vectors per row. */
export const TILE_K = 32;

/** A workgroup's output tile and each invocation's register block. */
export interface MatmulTile {
  /** Weight rows per workgroup (output features). */
  rows: number;
  /** Tokens per workgroup. */
  tokens: number;
  /** Rows per invocation, a multiple of 4 (held as vec4 accumulators). */
  rowsPer: number;
  /** Tokens per invocation, a multiple of 4 (read as vec4s of the x tile). */
  tokensPer: number;
}

/**
 * Tiles by batch size, first fit: a tile's token side is padding beyond the batch, so short prompts take
 * short tiles. Each stays within WebGPU's portable 16 KiB of workgroup memory. README.md, "Prefill matmul".
 */
export const MATMUL_TILES: readonly { maxTokens: number; tile: MatmulTile }[] = [
  // 32 invocations of 4 rows × 4 tokens
  { maxTokens: 8, tile: { rows: 64, tokens: 8, rowsPer: 4, tokensPer: 4 } },
  // 32 invocations of 8 rows × 4 tokens
  { maxTokens: 16, tile: { rows: 64, tokens: 16, rowsPer: 8, tokensPer: 4 } },
  // 64 invocations of 8 rows × 8 tokens
  { maxTokens: Infinity, tile: { rows: 64, tokens: 64, rowsPer: 8, tokensPer: 8 } },
];

/** The tile a batch of `n` tokens takes. */
export const matmulTileFor = (n: number): MatmulTile => MATMUL_TILES.find((t) => n <= t.maxTokens)!.tile;

/** Columns of one step decode in the weight tile: the row-block step, but one 32-column sub-block for Q4_K (TILE_K). */
const tileStep = (dtype: DType): number => (dtype === 'q4_k' ? TILE_K : vectorWidth(dtype));

/**
 * How the weight tile is loaded: `step` decodes whole 16-byte vectors or 32-element GGUF blocks
 * (wgsl.ts's row-block decoders), which needs every row to start on such a step (cols a multiple of
 * vectorWidth); `element` widens one element at a time with `w_at` (any format and shape).
 */
export function matmulLoader(dtype: DType, cols: number): 'step' | 'element' {
  const vw = tileStep(dtype);
  return vw > 0 && cols % vw === 0 ? 'step' : 'element';
}

/**
 * WGSL of the tiled matmul for `dtype` weights. Grid: x over row tiles, y over token tiles. Weights are
 * staged as WT[k][row] and activations as XT[k][token], both in vec4s. Invocation (lid.x, lid.y) owns
 * rows (g·TX + lid.x)·4 + 0..3 for g < rowsPer/4 and tokens (q·TY + lid.y)·4 + 0..3 for q < tokensPer/4,
 * interleaved so neighbouring invocations read neighbouring vec4s of both tiles.
 */
export function tiledMatmulShader(dtype: DType, loader: 'step' | 'element', t: MatmulTile): string {
  return tiledMatmulWith(dtype, loader, t, DENSE_IO);
}

/**
 * Where a tile's tokens come from and go to. The dense matmul's tokens are the batch rows; the MoE
 * grouped matmul (wgsl-moe.ts) gathers an expert's (token, slot) rows through a list, so it brings its own
 * bindings, finds its tile (rowBase, tokBase, tokEnd, wRow0) in `prologue`, and defines `store`.
 */
export interface TileIO {
  /** Params struct, bindings (W bound as `array<u32>`, replaced per loader) and `fn store(tok, r, v)`. */
  header: string;
  /** Statements defining rowBase, tokBase, tokEnd (exclusive) and wRow0 (the weight row of tile row 0's block); may return (whole workgroup). */
  prologue(t: MatmulTile): string;
  /** Offset into X of token `tok`'s row (tok is an index in [tokBase, tokEnd)). */
  xRow(tok: string): string;
}

const DENSE_IO: TileIO = {
  header: WEIGHT_HEADER,
  prologue: (t) => `  let rowBase = wid.x * ${t.rows}u;
  let tokBase = wid.y * ${t.tokens}u;
  let tokEnd = S.n;
  let wRow0 = 0u;`,
  xRow: (tok) => `(${tok}) * P.xStride`,
};

/** The tiled matmul over the tokens and weight rows `io` names (same tiles, loaders and FMA order). */
export function tiledMatmulWith(dtype: DType, loader: 'step' | 'element', t: MatmulTile, io: TileIO): string {
  if (t.rowsPer % 4 !== 0 || t.tokensPer % 4 !== 0 || t.rows % t.rowsPer !== 0 || t.tokens % t.tokensPer !== 0) throw new Error(`tiled matmul: bad tile ${JSON.stringify(t)}`);
  const TX = t.rows / t.rowsPer;
  const TY = t.tokens / t.tokensPer;
  const threads = TX * TY;
  const G = t.rowsPer / 4;
  const H = t.tokensPer;
  const R4 = t.rows / 4;
  const T4 = t.tokens / 4;
  // WebGPU guarantees 16 KiB of workgroup memory; staying within it keeps the kernel valid on every adapter.
  const shared = TILE_K * (t.rows + t.tokens) * 4;
  if (shared > 16384) throw new Error(`tiled matmul: tile ${JSON.stringify(t)} needs ${shared} bytes of workgroup memory (16384 is the portable limit)`);
  // Token of accumulator h: 4 consecutive tokens per vec4 of the x tile.
  const tokOf = (h: number) => `(${Math.floor(h / 4) * TY}u + lid.y) * 4u + ${h % 4}u`;
  const quant = dtype === 'q8_0' || dtype === 'q4_0' || dtype === 'q4_k';
  // The block's scale (Q4_K: its sub-block's d·scale and dmin·min) applied as the tile is stored.
  const scale = dtype === 'q4_k' ? ' * s.x - s.y' : ' * s';
  const vw = loader === 'step' ? tileStep(dtype) : 1;
  const unitsPerRow = TILE_K / vw;
  const units = t.rows * unitsPerRow;
  const wType = loader === 'element' || quant ? 'array<u32>' : 'array<vec4<u32>>';
  const header = io.header.replace('var<storage, read> W: array<u32>;', `var<storage, read> W: ${wType};`);

  // Weight tile: unit u of the tile is `vw` consecutive columns of one row, widened into WT[k][row].
  const loadW =
    loader === 'element'
      ? `      var v = 0.0;
      if (r < P.rows && c < P.cols) { v = w_at(wRow0 + r, c); }
      WT[kk * ${R4}u + row / 4u][row % 4u] = v;`
      : `      if (r < P.rows && c < P.cols) {
        var w = wv_W(${quant ? `(wRow0 + r) * (P.cols / 32u) + c / 32u` : `((wRow0 + r) * P.cols + c) / ${vw}u`});
        ${quant ? 'let s = ws_W((wRow0 + r) * (P.cols / 32u) + c / 32u);' : ''}
        for (var j = 0u; j < ${vw}u; j++) { WT[(kk + j) * ${R4}u + row / 4u][row % 4u] = w[j / 4u][j % 4u]${quant ? scale : ''}; }
      } else {
        for (var j = 0u; j < ${vw}u; j++) { WT[(kk + j) * ${R4}u + row / 4u][row % 4u] = 0.0; }
      }`;
  const accs = Array.from({ length: H }, (_, h) => Array.from({ length: G }, (_, g) => `a${h}_${g}`));
  return `${STEP}${header}${loader === 'element' ? weightAccessor(dtype) : dtype === 'q4_k' ? Q4K_SUB_BLOCK : stepDecoder(dtype, 'W')}
var<workgroup> WT: array<vec4<f32>, ${TILE_K * R4}>;
var<workgroup> XT: array<vec4<f32>, ${TILE_K * T4}>;
@compute @workgroup_size(${TX}, ${TY})
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u,
        @builtin(local_invocation_index) li: u32) {
${io.prologue(t)}
${accs.flat().map((a) => `  var ${a} = vec4<f32>();`).join('\n')}
  for (var k0 = 0u; k0 < P.cols; k0 += ${TILE_K}u) {
    for (var u = li; u < ${units}u; u += ${threads}u) {
      let row = u / ${unitsPerRow}u;
      let kk = (u % ${unitsPerRow}u) * ${vw}u;
      let r = rowBase + row;
      let c = k0 + kk;
${loadW}
    }
    for (var e = li; e < ${t.tokens * TILE_K}u; e += ${threads}u) {
      let tok = e / ${TILE_K}u;
      let kk = e % ${TILE_K}u;
      var v = 0.0;
      if (tokBase + tok < tokEnd && k0 + kk < P.cols) { v = X[${io.xRow('tokBase + tok')} + k0 + kk]; }
      XT[kk * ${T4}u + tok / 4u][tok % 4u] = v;
    }
    workgroupBarrier();
    for (var k = 0u; k < ${TILE_K}u; k++) {
${Array.from({ length: G }, (_, g) => `      let w${g} = WT[k * ${R4}u + ${g * TX}u + lid.x];`).join('\n')}
${Array.from({ length: H / 4 }, (_, q) => `      let xv${q} = XT[k * ${T4}u + ${q * TY}u + lid.y];`).join('\n')}
${Array.from({ length: H }, (_, h) => `      let x${h} = xv${Math.floor(h / 4)}[${h % 4}];`).join('\n')}
${accs.map((row, h) => row.map((a, g) => `      ${a} = fma(w${g}, vec4<f32>(x${h}), ${a});`).join('\n')).join('\n')}
    }
    workgroupBarrier();
  }
${accs
  .map((row, h) =>
    row
      .map(
        (a, g) => `  {
    let tok = tokBase + ${tokOf(h)};
    let r0 = rowBase + (${g * TX}u + lid.x) * 4u;
    if (tok < tokEnd) { for (var e = 0u; e < 4u; e++) { if (r0 + e < P.rows) { store(tok, r0 + e, ${a}[e]); } } }
  }`,
      )
      .join('\n'),
  )
  .join('\n')}
}
`;
}
