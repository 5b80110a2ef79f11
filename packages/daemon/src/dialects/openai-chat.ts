/**
 * OpenAI Chat Completions and Completions beyond plain text: the request's tools, tool_choice,
 * response_format, logprobs and tool/assistant-call messages into a ServeRequest's fields, and the
 * serve events back into a message (tool_calls, logprobs) or stream chunks (tool_calls deltas as
 * OpenAI sends them: id, type and name first, then the arguments).
 */
import type { ServeEvent, ServeRequest } from '../requests/request.js';
import type { TokenInfo } from '../requests/fields.js';
import { DialectError } from '../requests/errors.js';
import type { ResponseFormat, ToolChoice } from '../prompt/tools/plan.js';

type Json = Record<string, unknown>;

/** Text of a message's content (a string or parts); any part but text is a 400 naming it. */
export function contentText(content: unknown, where: string): string | null {
  if (content == null) return null;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) throw new DialectError(`${where}: expected a string or an array of content parts`, where);
  return content
    .map((p: Json, j) => {
      if (p?.type === 'text' || p?.type === 'input_text' || p?.type === 'output_text') return String(p.text ?? '');
      throw new DialectError(`${where}[${j}]: '${String(p?.type)}' content parts are not supported: the models Orchard runs read text only`, `${where}[${j}]`, 'unsupported_content');
    })
    .join('');
}

function toolChoiceOf(v: unknown): ToolChoice | undefined {
  if (v == null) return undefined;
  if (v === 'none' || v === 'auto' || v === 'required') return v;
  const name = (v as { function?: { name?: unknown }; name?: unknown }).function?.name ?? (v as { name?: unknown }).name;
  if (typeof name === 'string') return { name };
  throw new DialectError(`tool_choice: expected "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`, 'tool_choice');
}

function responseFormatOf(v: unknown): ResponseFormat | undefined {
  if (v == null) return undefined;
  const o = v as Json;
  if (o.type === 'text' || o.type === 'json_object') return { type: o.type };
  if (o.type === 'json_schema') {
    const js = (o.json_schema ?? {}) as Json;
    const schema = js.schema ?? {};
    if (typeof schema !== 'boolean' && (typeof schema !== 'object' || Array.isArray(schema))) throw new DialectError('response_format.json_schema.schema: expected a JSON schema object', 'response_format.json_schema.schema');
    return { type: 'json_schema', schema: schema as Json, ...(typeof js.name === 'string' ? { name: js.name } : {}) };
  }
  throw new DialectError(`response_format.type: expected "text", "json_object" or "json_schema", got ${JSON.stringify(o.type)}`, 'response_format.type');
}

/** The OpenAI chat body's messages and extras as ServeRequest fields. */
export function openAiChatFields(body: Json): Partial<Pick<ServeRequest, 'messages' | 'tools' | 'toolChoice' | 'parallelToolCalls' | 'responseFormat' | 'logprobs'>> {
  const messages = (body.messages as Json[]).map((m, i) => {
    const role = m.role === 'developer' ? 'system' : m.role === 'function' ? 'tool' : String(m.role);
    const calls = Array.isArray(m.tool_calls) ? (m.tool_calls as Json[]) : [];
    return {
      role,
      content: contentText(m.content, `messages[${i}].content`),
      ...(calls.length
        ? {
            tool_calls: calls.map((c) => {
              const f = (c.function ?? {}) as Json;
              return { id: String(c.id ?? ''), type: 'function' as const, function: { name: String(f.name ?? ''), arguments: typeof f.arguments === 'string' ? f.arguments : JSON.stringify(f.arguments ?? {}) } };
            }),
          }
        : {}),
      ...(typeof m.tool_call_id === 'string' ? { tool_call_id: m.tool_call_id } : {}),
      ...(typeof m.name === 'string' ? { name: m.name } : {}),
      // Reasoning sent back with the turn (llama-server / vLLM / DeepSeek's field; `reasoning` is OpenRouter's).
      ...(role === 'assistant' && typeof (m.reasoning_content ?? m.reasoning) === 'string' && (m.reasoning_content ?? m.reasoning) ? { reasoning_content: String(m.reasoning_content ?? m.reasoning) } : {}),
    };
  });
  const tools = Array.isArray(body.tools) ? (body.tools as ServeRequest['tools']) : undefined;
  const top = body.top_logprobs;
  if (top != null && !body.logprobs) throw new DialectError('top_logprobs: needs "logprobs": true', 'top_logprobs');
  return {
    messages,
    ...(tools?.length ? { tools } : {}),
    ...(body.tool_choice != null ? { toolChoice: toolChoiceOf(body.tool_choice) } : {}),
    ...(typeof body.parallel_tool_calls === 'boolean' ? { parallelToolCalls: body.parallel_tool_calls } : {}),
    ...(body.response_format != null ? { responseFormat: responseFormatOf(body.response_format) } : {}),
    ...(body.logprobs === true ? { logprobs: typeof top === 'number' ? top : 0 } : {}),
  };
}

/** Completions' `logprobs` (an integer: that many alternatives). */
export function openAiCompletionFields(body: Json): Partial<Pick<ServeRequest, 'logprobs' | 'responseFormat'>> {
  const lp = body.logprobs;
  return typeof lp === 'number' ? { logprobs: lp } : {};
}

/** OpenAI's chat logprobs entry for a token. */
export function chatLogprob(t: TokenInfo) {
  return { token: t.token, logprob: t.logprob, bytes: t.bytes, top_logprobs: t.top.map((a) => ({ token: a.token, logprob: a.logprob, bytes: a.bytes })) };
}

/** Completions' logprobs block for a run of tokens. */
export function completionLogprobs(tokens: TokenInfo[], offset0 = 0) {
  let offset = offset0;
  const text_offset = tokens.map((t) => {
    const o = offset;
    offset += t.token.length;
    return o;
  });
  return {
    tokens: tokens.map((t) => t.token),
    token_logprobs: tokens.map((t) => t.logprob),
    top_logprobs: tokens.map((t) => Object.fromEntries(t.top.map((a) => [a.token, a.logprob]))),
    text_offset,
  };
}

/** Collects a request's events into one chat message. */
export class ChatReply {
  content = '';
  reasoning = '';
  calls: { id: string; type: 'function'; function: { name: string; arguments: string } }[] = [];
  tokens: TokenInfo[] = [];

  add(e: ServeEvent): void {
    if (e.type === 'text') this.content += e.text;
    else if (e.type === 'reasoning') this.reasoning += e.text;
    else if (e.type === 'tool_call') this.calls.push({ id: e.call.id, type: 'function', function: { name: e.call.name, arguments: e.call.arguments } });
    else if (e.type === 'logprobs') this.tokens.push(...e.tokens);
  }

  message() {
    return {
      role: 'assistant' as const,
      content: this.calls.length && !this.content ? null : this.content,
      ...(this.reasoning ? { reasoning_content: this.reasoning } : {}),
      ...(this.calls.length ? { tool_calls: this.calls } : {}),
      refusal: null,
    };
  }
}

/** The chat stream delta(s) for one event; null for events a chat stream does not carry. */
export function chatDeltas(e: ServeEvent): { delta: Json; logprobs?: Json }[] | null {
  switch (e.type) {
    case 'text':
      return [{ delta: { content: e.text } }];
    case 'reasoning':
      return [{ delta: { reasoning_content: e.text } }];
    case 'tool_call':
      return [
        { delta: { tool_calls: [{ index: e.index, id: e.call.id, type: 'function', function: { name: e.call.name, arguments: '' } }] } },
        { delta: { tool_calls: [{ index: e.index, function: { arguments: e.call.arguments } }] } },
      ];
    case 'logprobs':
      return [{ delta: {}, logprobs: { content: e.tokens.map(chatLogprob) } }];
    default:
      return null;
  }
}
