/**
 * OpenAI Responses API ⇄ Orchard: a /v1/responses body (instructions, input as text or items —
 * messages, function_call, function_call_output —, function tools, text.format) into a ServeRequest,
 * and serve events into a Response object or its stream (response.created … output_item / content_part
 * / output_text / function_call_arguments events … response.completed). Nothing is stored: a request
 * naming previous_response_id is refused.
 */
import { randomBytes, randomInt } from 'node:crypto';
import type { ServeEvent, ServeRequest } from '../requests/request.js';
import { contentText } from './openai-chat.js';
import { DialectError } from '../requests/errors.js';
import type { ResponseFormat, ToolChoice } from '../prompt/tools/plan.js';
import { responsesReasoning } from './sampling.js';

type Json = Record<string, unknown>;
const rid = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

function toolChoiceOf(v: unknown): ToolChoice | undefined {
  if (v == null) return undefined;
  if (v === 'none' || v === 'auto' || v === 'required') return v;
  const name = (v as Json).name;
  if ((v as Json).type === 'function' && typeof name === 'string') return { name };
  throw new DialectError('tool_choice: expected "none", "auto", "required" or {"type": "function", "name": ...}', 'tool_choice');
}

function formatOf(text: unknown): ResponseFormat | undefined {
  const f = (text as Json | undefined)?.format as Json | undefined;
  if (!f) return undefined;
  if (f.type === 'text' || f.type === 'json_object') return { type: f.type };
  if (f.type === 'json_schema') return { type: 'json_schema', schema: (f.schema ?? {}) as Json, ...(typeof f.name === 'string' ? { name: f.name } : {}) };
  throw new DialectError(`text.format.type: expected "text", "json_object" or "json_schema", got ${JSON.stringify(f.type)}`, 'text.format.type');
}

export function responsesRequest(b: Json): ServeRequest {
  if (typeof b.model !== 'string' || !b.model) throw new DialectError('model: required', 'model');
  if (b.previous_response_id != null) throw new DialectError('previous_response_id: not supported (Orchard stores no responses): send the whole conversation as input', 'previous_response_id');
  const messages: NonNullable<ServeRequest['messages']> = [];
  if (typeof b.instructions === 'string' && b.instructions) messages.push({ role: 'system', content: b.instructions });
  const input = b.input;
  // A reasoning item goes back with the assistant turn after it (its text, or its summary's).
  let reasoning = '';
  const withReasoning = () => {
    const r = reasoning ? { reasoning_content: reasoning } : {};
    reasoning = '';
    return r;
  };
  if (typeof input === 'string') messages.push({ role: 'user', content: input });
  else if (Array.isArray(input)) {
    input.forEach((it: Json, i) => {
      const type = it.type ?? 'message';
      if (type === 'message') {
        const role = it.role === 'developer' ? 'system' : String(it.role);
        messages.push({ role, content: contentText(it.content, `input[${i}].content`) ?? '', ...(role === 'assistant' ? withReasoning() : {}) });
      } else if (type === 'function_call') {
        const call = { id: String(it.call_id), type: 'function' as const, function: { name: String(it.name), arguments: String(it.arguments ?? '{}') } };
        const last = messages[messages.length - 1];
        // Consecutive calls are one assistant turn (parallel calls).
        if (last?.role === 'assistant' && last.tool_calls && !last.content) last.tool_calls.push(call);
        else messages.push({ role: 'assistant', content: null, tool_calls: [call], ...withReasoning() });
      } else if (type === 'function_call_output') {
        messages.push({ role: 'tool', tool_call_id: String(it.call_id), content: typeof it.output === 'string' ? it.output : JSON.stringify(it.output) });
      } else if (type === 'reasoning') {
        const parts = (Array.isArray(it.content) && it.content.length ? it.content : Array.isArray(it.summary) ? it.summary : []) as Json[];
        reasoning += parts.map((p) => (typeof p.text === 'string' ? p.text : '')).join('\n');
      } else {
        throw new DialectError(`input[${i}].type: '${String(type)}' items are not supported`, `input[${i}].type`);
      }
    });
  } else throw new DialectError('input: expected a string or an array of items', 'input');
  const tools = Array.isArray(b.tools)
    ? (b.tools as Json[]).map((t, i) => {
        if (t.type !== 'function') throw new DialectError(`tools[${i}]: '${String(t.type)}' tools are not supported (only function tools)`, `tools[${i}].type`);
        return { type: 'function' as const, function: { name: String(t.name), ...(typeof t.description === 'string' ? { description: t.description } : {}), parameters: (t.parameters ?? { type: 'object', properties: {} }) as Json } };
      })
    : [];
  const max = b.max_output_tokens;
  return {
    kind: 'chat',
    messages,
    ...(typeof max === 'number' ? { maxTokens: max } : {}),
    temperature: typeof b.temperature === 'number' ? b.temperature : 1,
    topP: typeof b.top_p === 'number' ? b.top_p : 1,
    seed: randomInt(0, 2 ** 31),
    stop: [],
    ...(tools.length ? { tools } : {}),
    ...(b.tool_choice != null ? { toolChoice: toolChoiceOf(b.tool_choice) } : {}),
    ...(typeof b.parallel_tool_calls === 'boolean' ? { parallelToolCalls: b.parallel_tool_calls } : {}),
    ...(formatOf(b.text) ? { responseFormat: formatOf(b.text) } : {}),
    ...responsesReasoning(b.reasoning),
  };
}

type Item = Json & { type: string };

/** Builds a Response from events, and the stream events that describe it as it grows. */
export class ResponseBuilder {
  readonly id = rid('resp');
  readonly createdAt = Math.floor(Date.now() / 1000);
  readonly output: Item[] = [];
  #seq = 0;
  #text: Item | null = null;

  constructor(readonly model: string) {}

  #ev(type: string, fields: Json): { event: string; data: Json } {
    return { event: type, data: { type, sequence_number: this.#seq++, ...fields } };
  }

  response(status: 'in_progress' | 'completed' | 'incomplete', usage: Json | null = null): Json {
    return {
      id: this.id,
      object: 'response',
      created_at: this.createdAt,
      status,
      model: this.model,
      output: this.output,
      incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
      error: null,
      usage,
      parallel_tool_calls: true,
      tool_choice: 'auto',
      tools: [],
      text: { format: { type: 'text' } },
    };
  }

  start() {
    return [this.#ev('response.created', { response: this.response('in_progress') }), this.#ev('response.in_progress', { response: this.response('in_progress') })];
  }

  /** Reasoning as a reasoning item (its text as reasoning_text content, as gpt-oss's Responses API gives it). */
  #reasoning: Item | null = null;

  #closeReasoning() {
    const item = this.#reasoning;
    if (!item) return [];
    this.#reasoning = null;
    const index = this.output.indexOf(item);
    const part = (item.content as Json[])[0];
    item.status = 'completed';
    return [this.#ev('response.reasoning_text.done', { item_id: item.id, output_index: index, content_index: 0, text: part.text }), this.#ev('response.output_item.done', { output_index: index, item })];
  }

  #closeText() {
    const item = this.#text;
    if (!item) return [];
    this.#text = null;
    const index = this.output.indexOf(item);
    const part = (item.content as Json[])[0];
    item.status = 'completed';
    return [
      this.#ev('response.output_text.done', { item_id: item.id, output_index: index, content_index: 0, text: part.text }),
      this.#ev('response.content_part.done', { item_id: item.id, output_index: index, content_index: 0, part }),
      this.#ev('response.output_item.done', { output_index: index, item }),
    ];
  }

  event(e: ServeEvent) {
    if (e.type === 'reasoning') {
      const out = this.#closeText();
      if (!this.#reasoning) {
        this.#reasoning = { type: 'reasoning', id: rid('rs'), status: 'in_progress', summary: [], content: [{ type: 'reasoning_text', text: '' }] };
        this.output.push(this.#reasoning);
        out.push(this.#ev('response.output_item.added', { output_index: this.output.length - 1, item: { ...this.#reasoning, content: [] } }));
      }
      const part = (this.#reasoning.content as Json[])[0];
      part.text = String(part.text) + e.text;
      out.push(this.#ev('response.reasoning_text.delta', { item_id: this.#reasoning.id, output_index: this.output.indexOf(this.#reasoning), content_index: 0, delta: e.text }));
      return out;
    }
    if (e.type === 'text') {
      const out: { event: string; data: Json }[] = this.#closeReasoning();
      if (!this.#text) {
        this.#text = { type: 'message', id: rid('msg'), status: 'in_progress', role: 'assistant', content: [{ type: 'output_text', text: '', annotations: [] }] };
        this.output.push(this.#text);
        const index = this.output.length - 1;
        out.push(this.#ev('response.output_item.added', { output_index: index, item: { ...this.#text, content: [] } }), this.#ev('response.content_part.added', { item_id: this.#text.id, output_index: index, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } }));
      }
      const part = (this.#text.content as Json[])[0];
      part.text = String(part.text) + e.text;
      out.push(this.#ev('response.output_text.delta', { item_id: this.#text.id, output_index: this.output.indexOf(this.#text), content_index: 0, delta: e.text }));
      return out;
    }
    if (e.type === 'tool_call') {
      const out = [...this.#closeReasoning(), ...this.#closeText()];
      const item: Item = { type: 'function_call', id: rid('fc'), call_id: e.call.id, name: e.call.name, arguments: e.call.arguments, status: 'completed' };
      this.output.push(item);
      const index = this.output.length - 1;
      out.push(
        this.#ev('response.output_item.added', { output_index: index, item: { ...item, arguments: '', status: 'in_progress' } }),
        this.#ev('response.function_call_arguments.delta', { item_id: item.id, output_index: index, delta: e.call.arguments }),
        this.#ev('response.function_call_arguments.done', { item_id: item.id, output_index: index, arguments: e.call.arguments }),
        this.#ev('response.output_item.done', { output_index: index, item }),
      );
      return out;
    }
    return [];
  }

  finish(done: Extract<ServeEvent, { type: 'done' }>) {
    const out = [...this.#closeReasoning(), ...this.#closeText()];
    const status = done.finishReason === 'length' ? 'incomplete' : 'completed';
    const usage = { input_tokens: done.promptTokens, input_tokens_details: { cached_tokens: done.cachedPromptTokens ?? 0 }, output_tokens: done.completionTokens, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: done.promptTokens + done.completionTokens };
    out.push(this.#ev(status === 'completed' ? 'response.completed' : 'response.incomplete', { response: this.response(status, usage) }));
    return { events: out, response: this.response(status, usage) };
  }
}
