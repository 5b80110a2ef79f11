/**
 * A tool-call format: how one family of chat templates writes calls, as a capabilities record found
 * from the template's own text (never from a model's name). Each format reads replies (a parser) and
 * writes the grammar that forces calls when the client requires one (tool_choice required / named).
 */
import type { StructuralFormat, ToolDefinition } from '@orchard/engine';
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

/** A tool's parameter schema; a tool without one takes an empty object. */
export function parametersOf(t: ToolDefinition): Record<string, unknown> {
  return t.function.parameters ?? { type: 'object', properties: {} };
}
