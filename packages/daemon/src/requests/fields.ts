/**
 * The parts of a generation request that every API dialect shares beyond plain text: conversation
 * messages with tool calls and results, tool definitions, tool choice, output format, logprobs. Zod
 * schemas, so a request forwarded to another node is checked again there.
 */
import { z } from 'zod';

/** Sampling fields of a ServeRequest beyond temperature / top_p / top_k / seed / stop (all optional). */
export const samplingFields = {
  minP: z.number().min(0).max(1).optional(),
  typicalP: z.number().gt(0).max(1).optional(),
  repeatPenalty: z.number().gt(0).max(100).optional(),
  frequencyPenalty: z.number().min(-100).max(100).optional(),
  presencePenalty: z.number().min(-100).max(100).optional(),
  /** The penalties' window in tokens (the sequence's last n, prompt included). */
  repeatLastN: z.number().int().min(0).max(2 ** 31 - 1).optional(),
  /** Token id (decimal) → added to its logit. */
  logitBias: z.record(z.string().regex(/^\d{1,9}$/), z.number().min(-1000).max(1000)).optional(),
  /**
   * Reasoning before the answer: off, on, or on at an effort (gpt-oss). Reaches the template as
   * `enable_thinking` (Qwen3, DeepSeek V3.1 `thinking`) and `reasoning_effort` (gpt-oss). Absent: the
   * template's default.
   */
  reasoning: z.union([z.boolean(), z.enum(['low', 'medium', 'high'])]).optional(),
};

export const toolCallSchema = z.object({
  id: z.string().min(1).max(256),
  type: z.literal('function'),
  function: z.object({ name: z.string().min(1).max(256), arguments: z.string().max(1 << 20) }),
});

export const serveMessageSchema = z.object({
  role: z.string().max(64),
  content: z.string().nullable(),
  tool_calls: z.array(toolCallSchema).max(128).optional(),
  tool_call_id: z.string().max(256).optional(),
  name: z.string().max(256).optional(),
  /** Assistant messages: the reasoning that came before the answer (OpenAI-compatible `reasoning_content`). */
  reasoning_content: z.string().max(1 << 22).optional(),
});

export const toolDefinitionSchema = z.object({
  type: z.literal('function'),
  function: z.object({
    name: z.string().regex(/^[a-zA-Z0-9_.-]{1,64}$/, 'a tool name is 1-64 letters, digits, _ . or -'),
    description: z.string().max(16384).optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().optional(),
  }),
});

export const toolChoiceSchema = z.union([z.enum(['none', 'auto', 'required']), z.object({ name: z.string().min(1).max(64) })]);

export const responseFormatSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text') }),
  z.object({ type: z.literal('json_object') }),
  z.object({ type: z.literal('json_schema'), schema: z.union([z.boolean(), z.record(z.string(), z.unknown())]), name: z.string().max(64).optional() }),
]);

/** The fields a ServeRequest adds for tools, structured output and logprobs (all optional). */
export const dialectFields = {
  tools: z.array(toolDefinitionSchema).max(128).optional(),
  toolChoice: toolChoiceSchema.optional(),
  parallelToolCalls: z.boolean().optional(),
  responseFormat: responseFormatSchema.optional(),
  /** Each token's logprob and this many alternatives. */
  logprobs: z.number().int().min(0).max(20).optional(),
  ...samplingFields,
};

/** A token as the logprobs of every API report it. */
export interface TokenInfo {
  token: string;
  bytes: number[];
  logprob: number;
  top: { token: string; bytes: number[]; logprob: number }[];
}
