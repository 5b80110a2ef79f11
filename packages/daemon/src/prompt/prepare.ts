/**
 * What a request becomes for one model: the prompt's token ids, the output constraint and how to read
 * the reply. One function for every path that needs the prompt — the executor that runs it and the
 * endpoints that only count or show it (Anthropic count_tokens, apply-template) — so a count is
 * always what the request is billed.
 */
import type { ConstraintSpec, ModelTokenizer } from '@orchard/engine';
import type { ServeRequest } from '../requests/request.js';
import type { ReplyParser } from '../requests/reply.js';
import { DialectError } from '../requests/errors.js';
import { planChat } from './tools/plan.js';
import { plainParser } from './tools/thinking.js';

export interface PreparedPrompt {
  /** The prompt as text (the template's rendering, or the plain conversation). */
  text: string;
  ids: number[];
  constraint: ConstraintSpec | null;
  keepSpecialTokens: boolean;
  /** The tool-call format the template speaks, if any. */
  format: string | null;
  parser: () => ReplyParser;
}

/** Throws DialectError (a 400 naming the field) for what this model cannot serve as asked. */
export function preparePrompt(tok: ModelTokenizer, model: string, req: ServeRequest): PreparedPrompt {
  const json = req.responseFormat && req.responseFormat.type !== 'text' ? (req.responseFormat.type === 'json_object' ? { type: 'object' } : req.responseFormat.schema) : null;
  const plain = (text: string): PreparedPrompt => ({
    text,
    ids: tok.encode(text, { addSpecialTokens: true }),
    constraint: json === null ? null : { type: 'json_schema', schema: json },
    keepSpecialTokens: false,
    format: null,
    parser: plainParser,
  });
  if (req.kind !== 'chat') return plain(req.prompt ?? '');
  const messages = req.messages ?? [];
  if (tok.chatTemplate || req.tools?.length || messages.some((m) => m.role === 'tool' || m.tool_calls?.length) || (req.reasoning !== undefined && req.reasoning !== false)) {
    const plan = planChat(tok, model, { messages, tools: req.tools, toolChoice: req.toolChoice, parallelToolCalls: req.parallelToolCalls, responseFormat: req.responseFormat, reasoning: req.reasoning });
    return { text: plan.prompt, ids: tok.encode(plan.prompt, { addSpecialTokens: false }), constraint: plan.constraint, keepSpecialTokens: plan.keepSpecialTokens, format: plan.format, parser: () => plan.parser() };
  }
  // A text-continuation model has no template: the conversation as plain text, ready for the reply.
  return plain(messages.map((m) => (m.role === 'system' ? `${m.content ?? ''}\n\n` : `${m.role === 'assistant' ? 'Assistant' : 'User'}: ${m.content ?? ''}\n`)).join('') + 'Assistant:');
}

/** Token ids in logit_bias must name tokens of the model's vocabulary. */
export function checkLogitBias(req: ServeRequest, vocabSize: number): void {
  for (const id of Object.keys(req.logitBias ?? {})) {
    if (Number(id) >= vocabSize) throw new DialectError(`logit_bias: token ${id} is outside the model's vocabulary of ${vocabSize}`, 'logit_bias');
  }
}
