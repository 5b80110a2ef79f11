/**
 * Colours for the CLI and the daemon's pretty log lines (below both), on only where a person reads
 * them: a terminal (TERM not "dumb"), unless NO_COLOR is set (https://no-color.org); FORCE_COLOR
 * turns them on anyway. picocolors decides by other rules (it colours in CI, and always by stdout),
 * so the decision is made here per stream.
 */
import pc from 'picocolors';
import { colorEnv } from './config/terminal.js';

export type Paint = ReturnType<typeof pc.createColors>;

export function colorsWanted(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = colorEnv()): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0' && env.FORCE_COLOR !== 'false') return true;
  return !!stream.isTTY && env.TERM !== 'dumb';
}

/** Colours for text written to stderr (notes, errors, statistics). */
export const paint: Paint = pc.createColors(colorsWanted(process.stderr));
/** Colours for text written to stdout. */
export const paintOut: Paint = pc.createColors(colorsWanted(process.stdout));
