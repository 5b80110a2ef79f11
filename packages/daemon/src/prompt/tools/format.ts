/**
 * A tool-call format: how one family of chat templates writes calls, as a capabilities record found
 * from the template's own text (never from a model's name). Each format reads replies (a parser) and
 * writes the grammar that forces calls when the client requires one (tool_choice required / named)
 * and, from the format's opening marker on, holds a call the model starts in auto mode.
 */
import type { StructuralFormat, TagFormat, ToolDefinition } from '@orchard/engine';
import type { ReplyParser } from '../../requests/reply.js';

export interface ToolCallFormat {
  readonly name: string;
  /** The template writes calls this way (its markers are in the template's source). */
  detect(template: string): boolean;
  /**
   * A parser for one reply; `newId` names calls the model does not name itself. `tools`: the
   * request's tools, for formats whose values are typed by the schema (key/value formats).
   */
  parser(newId: (index: number, name: string) => string, tools?: ToolDefinition[]): ReplyParser;
  /** One or more calls (only one unless `parallel`), each to one of `tools` with arguments matching its schema. */
  grammar(tools: ToolDefinition[], parallel: boolean): StructuralFormat;
  /**
   * The text that opens every call (or the calls' section). With tool_choice auto the reply is free
   * until the model writes it, then held to `grammar` (see lazyCallGrammar). Formats without a fixed
   * opening (Llama 3's bare JSON, Functionary v3.2's recipients, harmony's channels) leave it out.
   */
  trigger?: string;
  /** An id for a new call that the template accepts when the conversation comes back. @default call_<24 alphanumerics> */
  newId?(index: number, name: string): string;
  /** An id from the client, as the template accepts it (Mistral: 9 alphanumerics). @default unchanged */
  historyId?(id: string): string;
  /** One call written out, for templates that never describe tools themselves (the caller tells the model how to call). */
  example?(name: string, args: string): string;
  /**
   * The tool description the model card prescribes, for a template that never renders `tools`
   * (DeepSeek): appended to the system prompt after a blank line, as the card lays it out.
   */
  toolPrompt?(tools: ToolDefinition[]): string;
  /**
   * A past assistant's calls as the model writes them, for a template that never writes `tool_calls`
   * (Granite 3.x): they go back to it in the message's content. `arguments`: JSON text of an object.
   */
  callsAsContent?(calls: { name: string; arguments: string }[]): string;
}

/**
 * tool_choice auto: free text, and from the format's trigger on, calls as its grammar forces them (a
 * lazy grammar, as llama.cpp applies one): a model that starts a call cannot write a malformed one —
 * what small and quantized models get wrong most. Null where the format has no trigger or its grammar
 * does not open every call with it.
 */
export function lazyCallGrammar(format: ToolCallFormat, tools: ToolDefinition[], parallel: boolean): StructuralFormat | null {
  const trigger = format.trigger;
  if (!trigger) return null;
  const g = format.grammar(tools, parallel);
  // A section (DeepSeek, Kimi, Mistral's list) holds all its calls: one of it, then the reply ends.
  const tags = g.type === 'tag' ? [g] : g.type === 'tags_with_separator' ? g.tags : g.type === 'or' ? g.elements : [];
  if (!tags.length || !tags.every((t) => t.type === 'tag' && t.begin.startsWith(trigger))) return null;
  return { type: 'triggered_tags', triggers: [trigger], tags: tags as TagFormat[], stop_after_first: g.type === 'tag' || !parallel };
}

/** A tool's parameter schema; a tool without one takes an empty object. */
export function parametersOf(t: ToolDefinition): Record<string, unknown> {
  return t.function.parameters ?? { type: 'object', properties: {} };
}
