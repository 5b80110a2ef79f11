/**
 * Loads tools/llama-oracle (node-llama-cpp, installed separately with `npm ci --prefix tools/llama-oracle`)
 * for the oracle tests, or says why it cannot.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const ORACLE_DIR = join(REPO_ROOT, 'tools/llama-oracle');

export interface Oracle {
  vocabSize: number;
  /** Softmax of llama.cpp's logits after each prefix tokens[0..i], i in `at` (default: the whole sequence). */
  nextTokenProbabilities(tokens: number[], at?: number[]): Promise<Float32Array[]>;
  greedy(tokens: number[], count: number): Promise<number[]>;
  dispose(): Promise<void>;
}

export interface OracleModule {
  openOracle(ggufPath: string, options?: { threads?: number; contextSize?: number; kvCacheType?: 'F32' | 'F16' }): Promise<Oracle>;
}

/** CI sets this so a missing oracle fails the run instead of skipping. */
export const ORACLE_REQUIRED = process.env.ORCHARD_REQUIRE_ORACLE === '1';

/** Why the oracle cannot run here, or null when node-llama-cpp is installed. */
export function oracleMissingReason(): string | null {
  if (!existsSync(join(ORACLE_DIR, 'node_modules/node-llama-cpp/package.json'))) {
    return `node-llama-cpp is not installed in tools/llama-oracle (run: npm ci --prefix tools/llama-oracle)`;
  }
  return null;
}

export async function loadOracleModule(): Promise<OracleModule> {
  return (await import(pathToFileURL(join(ORACLE_DIR, 'oracle.mjs')).href)) as OracleModule;
}
