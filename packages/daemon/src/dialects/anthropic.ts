/**
 * Anthropic Messages API ⇄ Orchard: a /v1/messages body into a ServeRequest (system, turns with
 * text, tool_use and tool_result blocks, tools with input_schema, tool_choice, stop_sequences), and
 * serve events back into a Message or Anthropic's stream (message_start, ping, content_block_start /
 * delta / stop per text, thinking or tool_use block, message_delta with the stop reason, message_stop).
 */
import { randomBytes, randomInt } from 'node:crypto';
import { z } from 'zod';
import type { FinishReason, ServeEvent, ServeRequest } from '../requests/request.js';
import { DialectError } from '../requests/errors.js';
import type { ToolChoice } from '../prompt/tools/plan.js';
import { anthropicReasoning } from './sampling.js';

const block = z.object({ type: z.string() }).passthrough();
const content = z.union([z.string(), z.array(block).max(4096)]);

export const anthropicBodySchema = z
  .object({
    model: z.string().min(1).max(512),
    max_tokens: z.number().int().min(1).max(1_000_000),
    messages: z.array(z.object({ role: z.enum(['user', 'assistant']), content }).passthrough()).min(1).max(1024),
    system: z.union([z.string(), z.array(block)]).optional(),
    stop_sequences: z.array(z.string().min(1).max(256)).max(8).optional(),
    stream: z.boolean().optional(),
    temperature: z.number().min(0).max(1).optional(),
    top_p: z.number().gt(0).max(1).optional(),
    top_k: z.number().int().min(0).optional(),
    tools: z.array(z.object({ name: z.string(), description: z.string().optional(), input_schema: z.record(z.string(), z.unknown()).optional(), type: z.string().optional() }).passthrough()).max(128).optional(),
    tool_choice: z.object({ type: z.enum(['auto', 'any', 'tool', 'none']), name: z.string().optional(), disable_parallel_tool_use: z.boolean().optional() }).optional(),
  })
  .passthrough();
export type AnthropicBody = z.infer<typeof anthropicBodySchema>;

type Block = Record<string, unknown>;

function textOfBlocks(blocks: Block[], where: string): string {
  return blocks
    .map((b, j) => {
      if (b.type === 'text') return String(b.text ?? '');
      throw new DialectError(`${where}[${j}]: '${String(b.type)}' blocks are not supported here: the models Orchard runs read text only`, `${where}[${j}]`);
    })
    .join('');
}

/** A tool_result's content as text (a string, or text blocks). */
function resultText(c: unknown, where: string): string {
  if (c == null) return '';
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return textOfBlocks(c as Block[], where);
  return JSON.stringify(c);
}

function toolChoiceOf(tc: AnthropicBody['tool_choice']): { toolChoice?: ToolChoice; parallelToolCalls?: boolean } {
  if (!tc) return {};
  const parallel = tc.disable_parallel_tool_use === true ? { parallelToolCalls: false } : {};
  if (tc.type === 'tool') {
    if (!tc.name) throw new DialectError('tool_choice.name: required when tool_choice.type is "tool"', 'tool_choice.name');
    return { toolChoice: { name: tc.name }, ...parallel };
  }
  return { toolChoice: tc.type === 'any' ? 'required' : tc.type, ...parallel };
}

/** The Messages body as a ServeRequest (throws DialectError naming the field at fault). */
export function anthropicRequest(b: AnthropicBody): ServeRequest {
  const messages: NonNullable<ServeRequest['messages']> = [];
  if (b.system !== undefined) messages.push({ role: 'system', content: typeof b.system === 'string' ? b.system : textOfBlocks(b.system as Block[], 'system') });
  b.messages.forEach((m, i) => {
    const where = `messages[${i}].content`;
    if (typeof m.content === 'string') {
      messages.push({ role: m.role, content: m.content });
      return;
    }
    const blocks = m.content as Block[];
    if (m.role === 'assistant') {
      const text = blocks.filter((x) => x.type === 'text').map((x) => String(x.text ?? '')).join('');
      const calls = blocks
        .filter((x) => x.type === 'tool_use')
        .map((x) => ({ id: String(x.id), type: 'function' as const, function: { name: String(x.name), arguments: JSON.stringify(x.input ?? {}) } }));
      // Thinking blocks go back to the template as the turn's reasoning (redacted ones carry none we can read).
      const reasoning = blocks.filter((x) => x.type === 'thinking').map((x) => String(x.thinking ?? '')).join('');
      const other = blocks.findIndex((x) => !['text', 'tool_use', 'thinking', 'redacted_thinking'].includes(String(x.type)));
      if (other >= 0) throw new DialectError(`${where}[${other}]: '${String(blocks[other].type)}' blocks are not supported in assistant turns`, `${where}[${other}]`);
      messages.push({ role: 'assistant', content: calls.length && !text ? null : text, ...(calls.length ? { tool_calls: calls } : {}), ...(reasoning ? { reasoning_content: reasoning } : {}) });
      return;
    }
    // A user turn: tool results answer the previous assistant's calls (as tool messages), then its text.
    const text: Block[] = [];
    blocks.forEach((x, j) => {
      if (x.type === 'tool_result') messages.push({ role: 'tool', tool_call_id: String(x.tool_use_id), content: (x.is_error ? 'Error: ' : '') + resultText(x.content, `${where}[${j}].content`) });
      else text.push(x);
    });
    if (text.length) messages.push({ role: 'user', content: textOfBlocks(text, where) });
  });
  const tools = b.tools?.map((t, i) => {
    if (t.type && t.type !== 'custom') throw new DialectError(`tools[${i}]: server tool '${t.type}' is not supported (only client tools with an input_schema)`, `tools[${i}].type`);
    return { type: 'function' as const, function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.input_schema ?? { type: 'object', properties: {} } } };
  });
  return {
    kind: 'chat',
    messages,
    maxTokens: b.max_tokens,
    temperature: b.temperature ?? 1,
    topP: b.top_p ?? 1,
    ...(b.top_k ? { topK: b.top_k } : {}),
    seed: randomInt(0, 2 ** 31),
    stop: b.stop_sequences ?? [],
    ...(tools?.length ? { tools } : {}),
    ...toolChoiceOf(b.tool_choice),
    ...anthropicReasoning(b.thinking),
  };
}

export const newMessageId = () => `msg_${randomBytes(12).toString('hex')}`;

export function stopReason(f: FinishReason): 'end_turn' | 'max_tokens' | 'tool_use' {
  return f === 'length' ? 'max_tokens' : f === 'tool_calls' ? 'tool_use' : 'end_turn';
}

function parsedInput(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return {};
  }
}

/** Events of one request collected into a Message. */
export class AnthropicMessage {
  readonly content: Block[] = [];
  add(e: ServeEvent): void {
    const last = this.content[this.content.length - 1];
    if (e.type === 'text') {
      if (last?.type === 'text') last.text = String(last.text) + e.text;
      else this.content.push({ type: 'text', text: e.text });
    } else if (e.type === 'reasoning') {
      if (last?.type === 'thinking') last.thinking = String(last.thinking) + e.text;
      else this.content.push({ type: 'thinking', thinking: e.text, signature: '' });
    } else if (e.type === 'tool_call') this.content.push({ type: 'tool_use', id: e.call.id, name: e.call.name, input: parsedInput(e.call.arguments) });
  }
  body(id: string, model: string, done: Extract<ServeEvent, { type: 'done' }>) {
    return {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: this.content,
      stop_reason: stopReason(done.finishReason),
      stop_sequence: null,
      usage: { input_tokens: done.promptTokens, output_tokens: done.completionTokens },
    };
  }
}

export interface SseEvent {
  event: string;
  data: Record<string, unknown>;
}

/** Serve events → Anthropic stream events. Text, thinking and each tool call are blocks, opened and closed in order. */
export class AnthropicStream {
  #index = -1;
  #open: 'text' | 'thinking' | null = null;

  constructor(
    readonly id: string,
    readonly model: string,
  ) {}

  start(inputTokens: number): SseEvent[] {
    return [
      { event: 'message_start', data: { type: 'message_start', message: { id: this.id, type: 'message', role: 'assistant', model: this.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: inputTokens, output_tokens: 0 } } } },
      { event: 'ping', data: { type: 'ping' } },
    ];
  }

  #close(): SseEvent[] {
    if (this.#open === null) return [];
    this.#open = null;
    return [{ event: 'content_block_stop', data: { type: 'content_block_stop', index: this.#index } }];
  }

  #opening(kind: 'text' | 'thinking'): SseEvent[] {
    if (this.#open === kind) return [];
    const out = this.#close();
    this.#open = kind;
    this.#index++;
    const block = kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '' };
    out.push({ event: 'content_block_start', data: { type: 'content_block_start', index: this.#index, content_block: block } });
    return out;
  }

  event(e: ServeEvent): SseEvent[] {
    if (e.type === 'text' || e.type === 'reasoning') {
      const kind = e.type === 'text' ? 'text' : 'thinking';
      const delta = kind === 'text' ? { type: 'text_delta', text: e.text } : { type: 'thinking_delta', thinking: e.text };
      return [...this.#opening(kind), { event: 'content_block_delta', data: { type: 'content_block_delta', index: this.#index, delta } }];
    }
    if (e.type === 'tool_call') {
      const out = this.#close();
      const index = ++this.#index;
      out.push(
        { event: 'content_block_start', data: { type: 'content_block_start', index, content_block: { type: 'tool_use', id: e.call.id, name: e.call.name, input: {} } } },
        { event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: e.call.arguments } } },
        { event: 'content_block_stop', data: { type: 'content_block_stop', index } },
      );
      return out;
    }
    return [];
  }

  finish(done: Extract<ServeEvent, { type: 'done' }>): SseEvent[] {
    return [
      ...this.#close(),
      { event: 'message_delta', data: { type: 'message_delta', delta: { stop_reason: stopReason(done.finishReason), stop_sequence: null }, usage: { output_tokens: done.completionTokens } } },
      { event: 'message_stop', data: { type: 'message_stop' } },
    ];
  }
}

/** Anthropic's error type for an HTTP status. */
export function anthropicErrorType(status: number): string {
  if (status === 400 || status === 413 || status === 422) return 'invalid_request_error';
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  if (status === 503 || status === 529) return 'overloaded_error';
  return 'api_error';
}

export function anthropicError(status: number, message: string) {
  return { type: 'error', error: { type: anthropicErrorType(status), message } };
}
