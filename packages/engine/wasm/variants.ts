import { expandExp } from './expf.js';

/**
 * The two builds of kernels.wat. A kernel that has a relaxed-SIMD form keeps both forms side by side in
 * one place, between marker lines (a generator writes them the same way):
 *
 *     ;; @if relaxed
 *     ...code of the relaxed build...
 *     ;; @else
 *     ...code of the baseline build...
 *     ;; @end
 *
 * `selectVariant` keeps one branch of each and drops the markers, so the baseline build is exactly the
 * WASM SIMD 128 code and the relaxed build differs only where a kernel says so. No nesting.
 *
 * The f16 and f32 kernels' multiply-adds are written once as a pseudo-instruction both builds expand:
 *
 *     (f32x4.muladd2 ACC A B C D)
 *       baseline: (f32x4.add ACC (f32x4.add (f32x4.mul A B) (f32x4.mul C D)))
 *       relaxed:  (f32x4.add ACC (f32x4.relaxed_madd A B (f32x4.mul C D)))
 *
 * so every f16 and f32 kernel (decode, small batches, the widened-scratch batches, row-major and packed)
 * rounds alike within a build, and a batch row still equals its matvec bit for bit. The FMA rounds
 * A·B + C·D once instead of twice, so the two builds' f16 and f32 results differ (both within the tests'
 * bounds).
 * One FMA, not two chained into the accumulator: the accumulator's dependency chain stays one add per
 * step. Two chained FMAs (4 + 4 cycles per step) made the one-row decode kernel 0.55-0.63x the baseline
 * (bench:kernels, cold 2304x768 / 768x2304 f16, row-major); this form is 1.2-1.3x there and 1.03-1.13x
 * on packed weights, which already stream at 0.8-0.9 of a read sweep.
 *
 * Two more, smaller:
 *
 *     (i32x4.trunc_inrange_f32x4_s A)   lanes known to be within i32 (and not NaN)
 *       baseline: i32x4.trunc_sat_f32x4_s; relaxed: i32x4.relaxed_trunc_f32x4_s (one cvttps2dq on x64,
 *       where V8 spells the saturating form in ~7 instructions; the same values in range)
 *     (f32x4.lanesum (local.get $v))    both builds: $hsum's expression written in place
 *       (f32.add (f32.add lane0 lane1) (f32.add lane2 lane3)): the same bits as (call $hsum ...), for
 *       loops where a call makes V8 keep every live vector in memory around it. Not everywhere: after
 *       the 4x2 f32 kernel's loop it made V8 spill inside the loop (22 -> 14 GMAC/s).
 *     (f32x4.lanemax (local.get $v))    both builds: the largest lane of a vector of |x| values (or NaNs)
 *       as an f32, by an integer max of the bits (|x| orders as its bits do, a NaN above every number):
 *       five instructions where V8 spells each scalar f32.max in ~8 for its NaN and signed-zero rules
 *
 * And one statement form, the same in both builds: `(f32x4.exp $y $x $t $k $r)`, e^x written in place
 * (wasm/expf.ts says why).
 */
export const SIMD_VARIANTS = ['baseline', 'relaxed'] as const;
export type SimdVariant = (typeof SIMD_VARIANTS)[number];

const IF = ';; @if relaxed';
const ELSE = ';; @else';
const END = ';; @end';

/** `wat` with the branches of `variant` kept and its pseudo-instructions expanded; `file` names the source in errors. */
export function selectVariant(wat: string, variant: SimdVariant, file: string): string {
  const trunc = variant === 'relaxed' ? 'i32x4.relaxed_trunc_f32x4_s' : 'i32x4.trunc_sat_f32x4_s';
  const wide = expandMuladd2(selectBranches(wat, variant, file), variant, file).replaceAll('(i32x4.trunc_inrange_f32x4_s ', `(${trunc} `);
  return expandExp(expandLanemax(expandLanesum(wide, file), file), file);
}

/**
 * `wat` with every `(f32x4.NAME (local.get $v))` replaced by `expand($v)`; any other use of the form
 * is an error naming its line.
 */
function expandOnLocal(wat: string, name: string, expand: (v: string) => string, file: string): string {
  const out = wat.replace(new RegExp(String.raw`\(f32x4\.${name} \(local\.get (\$[\w]+)\)\)`, 'g'), (_, v: string) => expand(v));
  const left = out.indexOf(`(f32x4.${name}`);
  if (left >= 0) throw new Error(`${file}:${out.slice(0, left).split('\n').length}: f32x4.${name} takes one (local.get $name)`);
  return out;
}

function expandLanesum(wat: string, file: string): string {
  return expandOnLocal(wat, 'lanesum', (v) => {
    const lane = (i: number) => `(f32x4.extract_lane ${i} (local.get ${v}))`;
    return `(f32.add (f32.add ${lane(0)} ${lane(1)}) (f32.add ${lane(2)} ${lane(3)}))`;
  }, file);
}

function expandLanemax(wat: string, file: string): string {
  return expandOnLocal(wat, 'lanemax', (v) => {
    const get = `(local.get ${v})`;
    const halves = `(i32x4.max_s ${get} (i8x16.shuffle 8 9 10 11 12 13 14 15 0 1 2 3 4 5 6 7 ${get} ${get}))`;
    return `(f32.reinterpret_i32 (i32x4.extract_lane 0 (i32x4.max_s ${halves} (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 ${halves} ${halves}))))`;
  }, file);
}

function selectBranches(wat: string, variant: SimdVariant, file: string): string {
  const out: string[] = [];
  // state: where the current line is: outside any branch, in the relaxed branch or in the baseline one
  let state: 'out' | 'relaxed' | 'baseline' = 'out';
  let opened = 0;
  const lines = wat.split('\n');
  lines.forEach((line, i) => {
    const marker = line.trim();
    const where = `${file}:${i + 1}`;
    if (marker === IF) {
      if (state !== 'out') throw new Error(`${where}: '${IF}' inside the branch opened at line ${opened} (no nesting)`);
      state = 'relaxed';
      opened = i + 1;
    } else if (marker === ELSE) {
      if (state !== 'relaxed') throw new Error(`${where}: '${ELSE}' without '${IF}'`);
      state = 'baseline';
    } else if (marker === END) {
      if (state === 'out') throw new Error(`${where}: '${END}' without '${IF}'`);
      state = 'out';
    } else if (state === 'out' || state === variant) {
      out.push(line);
    }
  });
  if (state !== 'out') throw new Error(`${file}:${opened}: '${IF}' is never closed with '${END}'`);
  return out.join('\n');
}

/** Both forms of a piece of generated code, as marker lines (`ind`: the indentation of the markers). */
export function bothVariants(ind: string, relaxed: string[], baseline: string[]): string[] {
  return [`${ind}${IF}`, ...relaxed, `${ind}${ELSE}`, ...baseline, `${ind}${END}`];
}

const MULADD2 = '(f32x4.muladd2';

/** The end (exclusive) of the parenthesised expression opening at `wat[start]`. */
function closing(wat: string, start: number, file: string): number {
  let depth = 0;
  for (let i = start; i < wat.length; i++) {
    if (wat[i] === '(') depth++;
    else if (wat[i] === ')' && --depth === 0) return i + 1;
  }
  throw new Error(`${file}: unbalanced parentheses from offset ${start}`);
}

function expandMuladd2(wat: string, variant: SimdVariant, file: string): string {
  let out = '';
  let from = 0;
  for (let at = wat.indexOf(MULADD2, from); at >= 0; at = wat.indexOf(MULADD2, from)) {
    const end = closing(wat, at, file);
    const line = wat.slice(0, at).split('\n').length;
    // the five operands, each a parenthesised expression (expanded in turn: they may nest)
    const args: string[] = [];
    let i = at + MULADD2.length;
    for (;;) {
      while (/\s/.test(wat[i])) i++;
      if (wat[i] === ')') break;
      if (wat[i] !== '(') throw new Error(`${file}:${line}: f32x4.muladd2 takes parenthesised operands`);
      const e = closing(wat, i, file);
      args.push(expandMuladd2(wat.slice(i, e), variant, file));
      i = e;
    }
    if (args.length !== 5) throw new Error(`${file}:${line}: f32x4.muladd2 takes 5 operands (acc a b c d), got ${args.length}`);
    const [acc, a, b, c, d] = args;
    out += wat.slice(from, at);
    out +=
      variant === 'relaxed'
        ? `(f32x4.add ${acc} (f32x4.relaxed_madd ${a} ${b} (f32x4.mul ${c} ${d})))`
        : `(f32x4.add ${acc} (f32x4.add (f32x4.mul ${a} ${b}) (f32x4.mul ${c} ${d})))`;
    from = end;
  }
  return out + wat.slice(from);
}
