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
 */
export const SIMD_VARIANTS = ['baseline', 'relaxed'] as const;
export type SimdVariant = (typeof SIMD_VARIANTS)[number];

const IF = ';; @if relaxed';
const ELSE = ';; @else';
const END = ';; @end';

/** `wat` with the branches of `variant` kept; `file` names the source in errors. */
export function selectVariant(wat: string, variant: SimdVariant, file: string): string {
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
