/**
 * Ollama's native API ⇄ Orchard: /api/chat and /api/generate bodies into ServeRequests (options,
 * format as JSON or a schema, tools with object arguments and id-less tool results), and serve events
 * into Ollama's NDJSON lines. Model names may carry Ollama's ":latest" tag.
 */
import { randomInt } from 'node:crypto';
import { z } from 'zod';
import type { ServeEvent, ServeRequest } from '../requests/request.js';
import { DialectError } from '../requests/errors.js';
import { ollamaSampling } from './sampling.js';
import { durationMs } from '../config/options.js';


/**
 * Ollama's per-request keep_alive: how long the model stays loaded after this request, as a duration
 * ("5m", "90s"), a number of seconds, 0 (unload once done) or negative / "never" (stay loaded), read
 * to ms (null: never). Absent: the daemon's --keep-alive.
 */
const keepAlive = z
  .union([z.string(), z.number()])
  .transform((v, ctx) => {
    try {
      return durationMs(v, 'keep_alive');
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: (err as Error).message });
      return z.NEVER;
    }
  })
  .optional();

const options = z
  .object({
    temperature: z.number().min(0).max(2).optional(),
    top_p: z.number().gt(0).max(1).optional(),
    top_k: z.number().int().min(0).optional(),
    seed: z.number().int().optional(),
    num_predict: z.number().int().optional(),
    stop: z.array(z.string().min(1).max(256)).max(8).optional(),
  })
  .passthrough()
  .optional();

const format = z.union([z.literal('json'), z.literal(''), z.record(z.string(), z.unknown())]).optional();

/** The fields /api/chat and /api/generate share: how to generate, stream, reason and keep the model. */
const generation = {
  format,
  options,
  stream: z.boolean().default(true),
  think: z.union([z.boolean(), z.string()]).optional(),
  keep_alive: keepAlive,
};

export const ollamaChatSchema = z
  .object({
    model: z.string().min(1).max(512),
    messages: z
      .array(
        z
          .object({
            role: z.enum(['system', 'user', 'assistant', 'tool']),
            content: z.string().default(''),
            images: z.array(z.string()).optional(),
            tool_calls: z.array(z.object({ function: z.object({ name: z.string(), arguments: z.union([z.record(z.string(), z.unknown()), z.string()]).optional() }) })).optional(),
            tool_name: z.string().optional(),
            thinking: z.string().optional(),
          })
          .passthrough(),
      )
      .max(1024)
      .default([]),
    tools: z.array(z.object({ type: z.literal('function').default('function'), function: z.object({ name: z.string(), description: z.string().optional(), parameters: z.record(z.string(), z.unknown()).optional() }) })).max(128).optional(),
    ...generation,
  })
  .passthrough();

export const ollamaGenerateSchema = z
  .object({
    model: z.string().min(1).max(512),
    prompt: z.string().default(''),
    system: z.string().optional(),
    raw: z.boolean().optional(),
    images: z.array(z.string()).optional(),
    ...generation,
  })
  .passthrough();

type Options = z.infer<typeof options>;

/** A model name as Ollama clients write it, resolved against the pod's models ("name:latest" → "name"). */
export function resolveOllamaModel(name: string, models: string[]): string | null {
  if (models.includes(name)) return name;
  const bare = name.replace(/:latest$/, '');
  return models.includes(bare) ? bare : null;
}

function sampling(o: Options, think: boolean | string | undefined, defaultMax?: number): Partial<ServeRequest> & Pick<ServeRequest, 'temperature' | 'topP' | 'seed' | 'stop'> {
  const n = o?.num_predict;
  return {
    ...ollamaSampling(o, think),
    temperature: o?.temperature ?? 0.8,
    topP: o?.top_p ?? 0.9,
    ...(o?.top_k ? { topK: o.top_k } : {}),
    // A negative seed is Ollama's "random".
    seed: o?.seed !== undefined && o.seed >= 0 ? o.seed : randomInt(0, 2 ** 31),
    stop: o?.stop ?? [],
    // Ollama: -1 is "until the context is full", -2 "fill the context".
    ...(n !== undefined && n >= 0 ? { maxTokens: n } : defaultMax !== undefined ? { maxTokens: defaultMax } : {}),
  };
}

function formatOf(f: z.infer<typeof format>): Partial<Pick<ServeRequest, 'responseFormat'>> {
  if (!f) return {};
  return f === 'json' ? { responseFormat: { type: 'json_object' } } : { responseFormat: { type: 'json_schema', schema: f } };
}

export function ollamaChatRequest(b: z.infer<typeof ollamaChatSchema>): ServeRequest {
  const messages: NonNullable<ServeRequest['messages']> = [];
  // Ollama's calls have no ids: give each one, and match tool results to pending calls in order.
  const pending: string[] = [];
  b.messages.forEach((m, i) => {
    if (m.images?.length) throw new DialectError(`messages[${i}].images: images are not supported: the models Orchard runs read text only`, `messages[${i}].images`, 'unsupported_content');
    if (m.role === 'assistant' && m.tool_calls?.length) {
      const calls = m.tool_calls.map((c, j) => {
        const id = `call_${i}_${j}`;
        pending.push(id);
        const args = c.function.arguments;
        return { id, type: 'function' as const, function: { name: c.function.name, arguments: typeof args === 'string' ? args : JSON.stringify(args ?? {}) } };
      });
      messages.push({ role: 'assistant', content: m.content || null, tool_calls: calls, ...(m.thinking ? { reasoning_content: m.thinking } : {}) });
    } else if (m.role === 'tool') {
      messages.push({ role: 'tool', content: m.content, tool_call_id: pending.shift() ?? `call_${i}`, ...(m.tool_name ? { name: m.tool_name } : {}) });
    } else messages.push({ role: m.role, content: m.content, ...(m.role === 'assistant' && m.thinking ? { reasoning_content: m.thinking } : {}) });
  });
  return {
    kind: 'chat',
    messages,
    ...sampling(b.options, b.think),
    ...formatOf(b.format),
    ...(b.tools?.length ? { tools: b.tools.map((t) => ({ type: 'function' as const, function: t.function })) } : {}),
  };
}

export function ollamaGenerateRequest(b: z.infer<typeof ollamaGenerateSchema>): ServeRequest {
  if (b.images?.length) throw new DialectError('images: not supported: the models Orchard runs read text only', 'images', 'unsupported_content');
  const base = { ...sampling(b.options, b.think), ...formatOf(b.format) };
  // raw: the prompt as is; otherwise through the model's chat template, as Ollama does.
  if (b.raw) return { kind: 'completion', prompt: b.prompt, ...base };
  return { kind: 'chat', messages: [...(b.system ? [{ role: 'system', content: b.system }] : []), { role: 'user', content: b.prompt }], ...base };
}

const ns = (ms: number) => Math.round(ms * 1e6);

/**
 * The final line's counters (Ollama reports durations in nanoseconds). prompt_eval_count is the whole
 * prompt, cached tokens included, and prompt_eval_cached_count the ones read from the prefix cache, as
 * Ollama's own server reports them (its llama-server counts: cache_n + prompt_n, and cache_n).
 */
export function ollamaDone(done: Extract<ServeEvent, { type: 'done' }>, startedAt: number, firstTokenAt: number | null) {
  const now = performance.now();
  const evalMs = firstTokenAt === null ? 0 : now - firstTokenAt;
  return {
    done: true,
    done_reason: done.finishReason === 'length' ? 'length' : 'stop',
    total_duration: ns(now - startedAt),
    load_duration: 0,
    prompt_eval_count: done.promptTokens,
    ...(done.cachedPromptTokens ? { prompt_eval_cached_count: done.cachedPromptTokens } : {}),
    prompt_eval_duration: ns((firstTokenAt ?? now) - startedAt),
    eval_count: done.completionTokens,
    eval_duration: ns(evalMs),
  };
}

/** A chat line's message for one event (null for events a line does not carry). */
export function ollamaMessagePart(e: ServeEvent): Record<string, unknown> | null {
  if (e.type === 'text') return { role: 'assistant', content: e.text };
  if (e.type === 'reasoning') return { role: 'assistant', content: '', thinking: e.text };
  if (e.type === 'tool_call') {
    let args: unknown = {};
    try {
      args = JSON.parse(e.call.arguments);
    } catch {
      /* parsers only emit JSON objects */
    }
    return { role: 'assistant', content: '', tool_calls: [{ function: { name: e.call.name, arguments: args } }] };
  }
  return null;
}
