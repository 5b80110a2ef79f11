/**
 * The embedding requests of the OpenAI (`POST /v1/embeddings`) and Ollama (`POST /api/embed`, the
 * older `/api/embeddings`) APIs, read into one form, and the vectors written back in each API's shape.
 * Pure: no I/O, tested directly.
 */
import { normalizeL2 } from '@orchard/engine';
import { DialectError } from '../requests/errors.js';

/** Inputs per request, as OpenAI allows. */
export const MAX_INPUTS = 2048;

export interface EmbedRequest {
  model: string;
  inputs: (string | number[])[];
  /** Cut inputs longer than the model's limit (Ollama's default) instead of refusing them (OpenAI's). */
  truncate: boolean;
  /** Keep the first `dimensions` values and scale back to unit length (Matryoshka-trained models). */
  dimensions: number | null;
}

const bad = (message: string, param: string) => new DialectError(message, param, 'invalid_value');

function modelOf(b: Record<string, unknown>): string {
  if (typeof b.model !== 'string' || !b.model) throw bad('model: required, the name of a model in this pod', 'model');
  return b.model;
}

function dimensionsOf(v: unknown): number | null {
  if (v === undefined || v === null) return null;
  if (!Number.isInteger(v) || (v as number) < 1) throw bad('dimensions: must be a positive integer', 'dimensions');
  return v as number;
}

const isIds = (v: unknown): v is number[] => Array.isArray(v) && v.length > 0 && v.every((t) => Number.isInteger(t) && t >= 0);

/** One input or a list of them: strings, or token ids (OpenAI's number[] / number[][]). */
function inputsOf(v: unknown, param: string, tokens: boolean): (string | number[])[] {
  const list: unknown[] = typeof v === 'string' || (tokens && isIds(v)) ? [v] : Array.isArray(v) ? v : [];
  if (!list.length) throw bad(`${param}: a string or a non-empty list of strings${tokens ? ' or token ids' : ''}`, param);
  if (list.length > MAX_INPUTS) throw bad(`${param}: at most ${MAX_INPUTS} inputs per request, got ${list.length}`, param);
  return list.map((x, i) => {
    if (typeof x === 'string') {
      if (!x) throw bad(`${param}[${i}]: an empty string has nothing to embed`, param);
      return x;
    }
    if (tokens && isIds(x)) return x;
    throw bad(`${param}[${i}]: expected a string${tokens ? ' or a list of token ids' : ''}`, param);
  });
}

export function openAiEmbedRequest(b: Record<string, unknown>): EmbedRequest {
  const model = modelOf(b);
  if (b.encoding_format !== undefined && b.encoding_format !== 'float' && b.encoding_format !== 'base64')
    throw bad(`encoding_format: 'float' or 'base64', got ${JSON.stringify(b.encoding_format)}`, 'encoding_format');
  return { model, inputs: inputsOf(b.input, 'input', true), truncate: false, dimensions: dimensionsOf(b.dimensions) };
}

export function ollamaEmbedRequest(b: Record<string, unknown>, legacy: boolean): EmbedRequest {
  const model = modelOf(b);
  if (b.truncate !== undefined && typeof b.truncate !== 'boolean') throw bad('truncate: must be true or false', 'truncate');
  const inputs = legacy ? inputsOf(b.prompt, 'prompt', false).slice(0, 1) : inputsOf(b.input, 'input', false);
  return { model, inputs, truncate: b.truncate !== false, dimensions: dimensionsOf(b.dimensions) };
}

/** The vectors at the requested width: the first `dimensions` values, unit length again. */
export function shaped(vectors: number[][], dimensions: number | null): number[][] {
  if (dimensions === null) return vectors;
  const have = vectors[0]?.length ?? 0;
  if (dimensions > have) throw bad(`dimensions: this model's embeddings have ${have} values; ask for at most that`, 'dimensions');
  return vectors.map((v) => Array.from(normalizeL2(Float32Array.from(v.slice(0, dimensions)))));
}

/** OpenAI's list of embeddings; base64 is the little-endian float32 bytes (what the openai SDK asks for by default). */
export function openAiEmbeddings(model: string, vectors: number[][], promptTokens: number, format: 'float' | 'base64') {
  return {
    object: 'list',
    data: vectors.map((v, index) => ({
      object: 'embedding',
      index,
      embedding: format === 'base64' ? Buffer.from(Float32Array.from(v).buffer).toString('base64') : v,
    })),
    model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}
