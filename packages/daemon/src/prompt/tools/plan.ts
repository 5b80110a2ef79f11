/**
 * Turns a chat request with tools and an output format into what generation needs, for one model:
 * the prompt (rendered by the model's own template, tools included), the constraint that forces a
 * tool call or JSON when the client asked for it, and the parser that reads the reply back.
 *
 * tool_choice: `none` renders no tools and reads no calls; `auto` renders them, reads calls if the
 * model writes them and holds a call it starts to the format (format.ts: lazyCallGrammar);
 * `required` and a named tool also constrain the reply to calls in the model's own
 * format (arguments matching each tool's schema). A template that cannot write tool calls is a 400
 * naming the model, never a silent prose answer. A forced reply on a template that opens <think> for
 * the model skips the reasoning (it starts with </think>).
 */
import { randomBytes } from 'node:crypto';
import { ChatTemplateError, type ChatMessage, type ConstraintSpec, type JsonSchema, type ModelTokenizer, type StructuralFormat, type ToolDefinition } from '@orchard/engine';
import { DialectError } from '../../requests/errors.js';
import type { ReplyParser } from '../../requests/reply.js';
import { lazyCallGrammar, type ToolCallFormat } from './format.js';
import { harmony } from './formats/harmony.js';
import { detectToolCallFormat, TOOL_CALL_FORMATS } from './registry.js';
import { plainParser, thinkingMarkers, withThinking } from './thinking.js';

export type ToolChoice = 'none' | 'auto' | 'required' | { name: string };

export type ResponseFormat = { type: 'text' } | { type: 'json_object' } | { type: 'json_schema'; schema: JsonSchema; name?: string };

export interface ChatToolsRequest {
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  /** @default 'auto' (with tools) */
  toolChoice?: ToolChoice;
  /** More than one call in a reply. @default true */
  parallelToolCalls?: boolean;
  responseFormat?: ResponseFormat;
  /** Reasoning before the answer: off, on, or on at an effort; absent: the template's default. */
  reasoning?: boolean | 'low' | 'medium' | 'high';
}

export interface ChatPlan {
  prompt: string;
  constraint: ConstraintSpec | null;
  /** Decode keeping special tokens: the parser reads the format's markers (some are special tokens). */
  keepSpecialTokens: boolean;
  /** The tool-call format the model's template speaks, if any. */
  format: string | null;
  /** A fresh parser for the reply. */
  parser(): ReplyParser;
}

function defaultId(): string {
  return `call_${randomBytes(12).toString('hex')}`;
}

/** Tool descriptions for a template that writes calls but never reads `tools` (DeepSeek), as a system message. */
function toolsSystemText(tools: ToolDefinition[], format: ToolCallFormat): string {
  const lines = tools.map((t) => JSON.stringify({ name: t.function.name, description: t.function.description ?? '', parameters: t.function.parameters ?? {} }));
  const example = format.example?.('tool_name', '{"argument": "value"}');
  return `## Tools\nYou can call the following functions:\n${lines.join('\n')}${example ? `\n\nTo call one, write exactly:\n${example}` : ''}`;
}

function withSystemText(messages: ChatMessage[], text: string): ChatMessage[] {
  if (messages[0]?.role === 'system') return [{ ...messages[0], content: `${messages[0].content ?? ''}\n\n${text}` }, ...messages.slice(1)];
  return [{ role: 'system', content: text }, ...messages];
}

/**
 * The template variables that turn reasoning on or off, as the templates read them: Qwen3's
 * `enable_thinking`, DeepSeek V3.1's `thinking`, gpt-oss's `reasoning_effort`, Seed-OSS's
 * `thinking_budget`. Asking a template
 * that never reasons to reason is a 400 (as Ollama answers "does not support thinking").
 */
function reasoningVariables(template: string | null, model: string, reasoning: ChatToolsRequest['reasoning']): Record<string, unknown> {
  if (reasoning === undefined) return {};
  const src = template ?? '';
  const reasons = /<\/think>|<\/seed:think>|enable_thinking|reasoning_effort|<\|channel\|>analysis/.test(src);
  if (reasoning !== false && !reasons) throw new DialectError(`the model '${model}' does not support thinking: its chat template ${template ? 'has no reasoning' : 'is missing'}`, 'reasoning', 'thinking_unsupported');
  const on = reasoning !== false;
  // Seed-OSS: a thinking budget of 0 is its "off" (unset, -1, leaves the budget to the model).
  return { enable_thinking: on, thinking: on, ...(on ? {} : { thinking_budget: 0 }), ...(typeof reasoning === 'string' ? { reasoning_effort: reasoning } : !on ? { reasoning_effort: 'low' } : {}) };
}

/** Llama 3.1's built-in tools: the template announces them (ipython mode) and writes their calls as NAME.call(...). */
const LLAMA_BUILTINS = ['brave_search', 'wolfram_alpha'];

/** The request's tools that the template takes as built-ins (`builtin_tools`), by name. */
function builtinTools(template: string | null, tools: ToolDefinition[]): string[] {
  if (!template?.includes('builtin_tools')) return [];
  return tools.map((t) => t.function.name).filter((n) => LLAMA_BUILTINS.includes(n));
}

/** Past calls written into their assistant message's content, for a template that never writes `tool_calls`. */
export function callsIntoContent(format: ToolCallFormat, messages: ChatMessage[]): ChatMessage[] {
  return messages.map((m) => {
    if (!m.tool_calls?.length) return m;
    const calls = m.tool_calls.map((c) => ({ name: c.function.name, arguments: typeof c.function.arguments === 'string' ? c.function.arguments : JSON.stringify(c.function.arguments) }));
    const { tool_calls: _calls, ...rest } = m;
    return { ...rest, content: `${m.content ?? ''}${format.callsAsContent!(calls)}` };
  });
}

function jsonConstraint(f: ResponseFormat | undefined): JsonSchema | null {
  if (!f || f.type === 'text') return null;
  return f.type === 'json_object' ? { type: 'object' } : f.schema;
}

export function planChat(tok: ModelTokenizer, model: string, req: ChatToolsRequest): ChatPlan {
  const tools = req.tools ?? [];
  const choice: ToolChoice = req.toolChoice ?? (tools.length ? 'auto' : 'none');
  if (choice !== 'none' && choice !== 'auto' && !tools.length) throw new DialectError(`tool_choice ${JSON.stringify(choice)} needs tools`, 'tool_choice');
  const active = tools.length > 0 && choice !== 'none';
  const caps = tok.chatTemplateCaps;
  const format = detectToolCallFormat(tok.chatTemplate);
  const history = req.messages.some((m) => m.role === 'tool' || m.tool_calls?.length);

  // A template that never writes past calls can still be given them as the model writes them (Granite).
  const callsInContent = !caps?.toolCalls && format?.callsAsContent ? format : null;
  if ((active || history) && !caps?.toolCalls && !callsInContent) {
    throw new DialectError(`the model '${model}' does not support tools: its chat template ${caps ? 'never writes tool calls' : 'is missing'}`, active ? 'tools' : 'messages', 'tools_unsupported');
  }
  if (active && !format) throw new DialectError(`the model '${model}' writes tool calls in a format Orchard does not read (known: ${TOOL_CALL_FORMATS.map((f) => f.name).join(', ')})`, 'tools', 'tools_unsupported');
  const names = new Set(tools.map((t) => t.function.name));
  if (typeof choice === 'object' && !names.has(choice.name)) throw new DialectError(`tool_choice names '${choice.name}', which is not among the tools`, 'tool_choice');

  let messages = req.messages;
  if (format?.historyId) {
    const id = format.historyId.bind(format);
    messages = messages.map((m) => ({
      ...m,
      ...(m.tool_calls ? { tool_calls: m.tool_calls.map((c) => ({ ...c, id: id(c.id) })) } : {}),
      ...(m.tool_call_id !== undefined ? { tool_call_id: id(m.tool_call_id) } : {}),
    }));
  }
  if (callsInContent) messages = callsIntoContent(callsInContent, messages);
  if (active && !caps!.tools) {
    // The model card's own wording where the format has one, after the system prompt (or an empty one) and a blank line.
    if (format!.toolPrompt) messages = messages[0]?.role === 'system' ? [{ ...messages[0], content: `${messages[0].content ?? ''}\n\n${format!.toolPrompt(tools)}` }, ...messages.slice(1)] : [{ role: 'system', content: `\n\n${format!.toolPrompt(tools)}` }, ...messages];
    else messages = withSystemText(messages, toolsSystemText(tools, format!));
  }

  let prompt: string;
  try {
    const builtins = active ? builtinTools(tok.chatTemplate, tools) : [];
    const custom = tools.filter((t) => !builtins.includes(t.function.name));
    prompt = tok.applyChatTemplate(messages, {
      addGenerationPrompt: true,
      tools: active && custom.length ? custom : undefined,
      variables: { ...reasoningVariables(tok.chatTemplate, model, req.reasoning), ...(builtins.length ? { builtin_tools: builtins } : {}) },
    });
  } catch (err) {
    if (err instanceof ChatTemplateError) throw new DialectError(`the chat template of '${model}' rejected the conversation: ${err.message.replace(/^the chat template failed: /, '')}`, 'messages', 'invalid_messages');
    throw err;
  }

  const json = jsonConstraint(req.responseFormat);
  const forced = active && choice !== 'auto' ? format!.grammar(typeof choice === 'object' ? tools.filter((t) => t.function.name === choice.name) : tools, typeof choice === 'object' ? false : req.parallelToolCalls !== false) : null;
  let constraint: ConstraintSpec | null = null;
  if (forced) constraint = { type: 'structural', format: forced };
  else if (json && active) {
    // The reply is either calls (in the model's format) or the JSON asked for.
    const calls: StructuralFormat = format!.grammar(tools, req.parallelToolCalls !== false);
    constraint = { type: 'structural', format: { type: 'or', elements: [calls, { type: 'json_schema', json_schema: json }] } };
  } else if (json) constraint = { type: 'json_schema', schema: json };

  const think = thinkingMarkers(tok.chatTemplate);
  // The template opened reasoning for the model: its marker ends the prompt (Seed-OSS with a budget of
  // 0 adds its budget tag after it; a closing tag after it, GLM's <think></think>, is reasoning off).
  const startsThinking = think !== null && new RegExp(`${think.open.replace(/[|\\^$.*+?()[\]{}]/g, '\\$&')}(<[^/<>][^<>]*>)?\\s*$`).test(prompt);
  // The template opened <think> (DeepSeek R1): a forced reply closes it at once, then calls or JSON.
  if (constraint && startsThinking) {
    const rest: StructuralFormat = constraint.type === 'structural' ? constraint.format : { type: 'json_schema', json_schema: (constraint as { schema: JsonSchema }).schema };
    constraint = { type: 'structural', format: { type: 'sequence', elements: [{ type: 'const_string', value: `${think.close}\n\n` }, rest] } };
  }
  // tool_choice auto: the model may answer in text (or reason first), but a call it starts is held to the format.
  if (!constraint && active && choice === 'auto') {
    const lazy = lazyCallGrammar(format!, tools, req.parallelToolCalls !== false);
    if (lazy) constraint = { type: 'structural', format: lazy, optional: true };
  }

  const newId = format?.newId?.bind(format) ?? defaultId;
  const reads = active ? format : format === harmony ? harmony : null;
  return {
    prompt,
    constraint,
    keepSpecialTokens: reads !== null,
    format: format?.name ?? null,
    parser() {
      const p = reads ? reads.parser(newId, tools) : plainParser();
      return think ? withThinking(p, startsThinking, think) : p;
    },
  };
}
