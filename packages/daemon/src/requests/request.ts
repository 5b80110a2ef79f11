/** A generation request as it travels between daemons, and the events that answer it. */
import { z } from 'zod';
import { dialectFields, serveMessageSchema, type TokenInfo } from './fields.js';
import type { ParsedCall } from './reply.js';

export const serveRequestSchema = z.object({
  kind: z.enum(['chat', 'completion']),
  messages: z.array(serveMessageSchema).max(1024).optional(),
  prompt: z.string().optional(),
  maxTokens: z.number().int().min(0).optional(),
  temperature: z.number().min(0).max(2),
  topP: z.number().gt(0).max(1),
  /** Keep the k most likely tokens (0 or absent: all). */
  topK: z.number().int().min(0).max(1_000_000).optional(),
  seed: z.number().int(),
  stop: z.array(z.string().min(1).max(256)).max(8),
  /** Speculative decoding (prompt lookup, or the draft model of --draft-model) for this request; absent: the instance's setting (--speculate). */
  speculate: z.enum(['prompt-lookup', 'draft', 'mtp', 'off']).optional(),
  ...dialectFields,
});
export type ServeRequest = z.infer<typeof serveRequestSchema>;

export type FinishReason = 'stop' | 'length' | 'tool_calls';

export type ServeEvent =
  | { type: 'start'; promptTokens: number }
  | { type: 'text'; text: string }
  /** Reasoning the model's format keeps apart from the answer (<think>, harmony analysis). */
  | { type: 'reasoning'; text: string }
  /** A whole tool call (arguments complete, a JSON object). */
  | { type: 'tool_call'; index: number; call: ParsedCall }
  /** Logprobs of the tokens generated since the last such event (when the request asked). */
  | { type: 'logprobs'; tokens: TokenInfo[] }
  /** `cachedPromptTokens`: prompt tokens whose K/V came from the prefix cache (counted in promptTokens, not prefilled). */
  | { type: 'done'; finishReason: FinishReason; promptTokens: number; completionTokens: number; decodeTokensPerSecond: number | null; cachedPromptTokens?: number }
  /** `status`: the HTTP status to answer with when nothing was streamed yet. */
  | { type: 'error'; status: number; code: string; message: string };
