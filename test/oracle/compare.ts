/** Engine-vs-llama.cpp comparison on one model directory, shared by the oracle tests. */
import { join } from 'node:path';
import { generate, loadInProcessModel, type InProcessModel } from '@orchard/engine';
import { hfToGguf } from '@orchard/engine/gguf';
import type { Oracle, OracleModule } from './llama-oracle.js';

export interface Comparison {
  /** Largest |p_engine - p_llama.cpp| over the vocabulary and all checked positions. */
  maxProbDiff: number;
  /** Positions (index into the token sequence) whose next-token distribution was compared. */
  positions: number[];
  /** Largest probability llama.cpp gave any token at any checked position (to show the test is not trivial). */
  maxProb: number;
  engineGreedy: number[];
  oracleGreedy: number[];
}

/** Probabilities from logits, in f64 (max subtracted first). */
export function softmax(logits: Float32Array): Float64Array {
  let max = -Infinity;
  for (const v of logits) if (v > max) max = v;
  const out = new Float64Array(logits.length);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += out[i] = Math.exp(logits[i] - max);
  for (let i = 0; i < out.length; i++) out[i] /= sum;
  return out;
}

/**
 * Engine next-token logits after each prefix ending at `positions` (sorted), feeding the sequence
 * in chunks between positions, so prompt batching and the KV cache are part of what is compared.
 */
async function engineProbabilities(model: InProcessModel, tokens: number[], positions: number[]): Promise<Float64Array[]> {
  const session = model.newSession(tokens.length);
  const out: Float64Array[] = [];
  let fed = 0;
  for (const p of positions) {
    const logits = await session.forward(tokens.slice(fed, p + 1));
    fed = p + 1;
    out.push(softmax(logits));
  }
  return out;
}

export async function compareWithOracle(
  oracleModule: OracleModule,
  modelDir: string,
  workDir: string,
  tokens: number[],
  options: { greedyTokens?: number; positions?: number[] } = {},
): Promise<Comparison> {
  const greedyTokens = options.greedyTokens ?? 64;
  const positions = options.positions ?? [0, 1, Math.floor(tokens.length / 2), tokens.length - 1];
  // F32 GGUF: llama.cpp then computes on exactly the values the engine widens its weights to.
  const ggufPath = join(workDir, 'model-f32.gguf');
  hfToGguf(modelDir, ggufPath, { dtype: 'f32' });
  const model = loadInProcessModel(modelDir);
  const oracle: Oracle = await oracleModule.openOracle(ggufPath, {
    threads: 1,
    contextSize: Math.max(tokens.length + greedyTokens, 64),
  });
  try {
    const ours = await engineProbabilities(model, tokens, positions);
    const theirs = await oracle.nextTokenProbabilities(tokens, positions);
    let maxProbDiff = 0;
    let maxProb = 0;
    positions.forEach((_, k) => {
      if (theirs[k].length !== ours[k].length) {
        throw new Error(`vocabulary sizes differ: llama.cpp ${theirs[k].length}, engine ${ours[k].length}`);
      }
      for (let i = 0; i < ours[k].length; i++) {
        maxProbDiff = Math.max(maxProbDiff, Math.abs(ours[k][i] - theirs[k][i]));
        maxProb = Math.max(maxProb, theirs[k][i]);
      }
    });
    const engineRun = await generate(model, tokens, { temperature: 0, maxTokens: greedyTokens, stopTokenIds: [] });
    const oracleGreedy = await oracle.greedy(tokens, greedyTokens);
    return { maxProbDiff, positions, maxProb, engineGreedy: engineRun.tokens, oracleGreedy };
  } finally {
    await oracle.dispose();
  }
}
