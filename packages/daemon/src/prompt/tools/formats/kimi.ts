/**
 * Kimi K2: calls inside <|tool_calls_section_begin|> ... <|tool_calls_section_end|>, each
 * <|tool_call_begin|>functions.NAME:INDEX<|tool_call_argument_begin|>{json}<|tool_call_end|>. The
 * model names its calls (functions.NAME:INDEX) and its template expects that id back.
 */
import type { StructuralFormat, TagFormat } from '@orchard/engine';
import { delimitedParser } from '../delimited.js';
import { parametersOf, type ToolCallFormat } from '../format.js';
import { argumentsJson } from '../scan.js';

const SECTION = { begin: '<|tool_calls_section_begin|>', end: '<|tool_calls_section_end|>' };
const CALL = { begin: '<|tool_call_begin|>', end: '<|tool_call_end|>' };
const ARGS = '<|tool_call_argument_begin|>';

export const kimiK2: ToolCallFormat = {
  name: 'kimi-k2',
  detect: (t) => t.includes(SECTION.begin),
  parser: (newId) =>
    delimitedParser(
      {
        section: SECTION,
        call: CALL,
        read(body) {
          const at = body.indexOf(ARGS);
          if (at < 0) return null;
          const id = body.slice(0, at).trim();
          const m = /^(?:functions\.)?([^:\s]+)(?::\d+)?$/.exec(id);
          const args = argumentsJson(body.slice(at + ARGS.length).trim());
          return m && args !== null ? { name: m[1], arguments: args, id } : null;
        },
      },
      newId,
    ),
  // The section is a tag around the calls; each call's begin marker doubles as the separator (xgrammar needs one).
  grammar: (tools, parallel): StructuralFormat => ({
    type: 'tag',
    begin: SECTION.begin + CALL.begin,
    content: {
      type: 'tags_with_separator',
      tags: tools.map((t): TagFormat => ({
        type: 'tag',
        begin: `functions.${t.function.name}:`,
        content: { type: 'sequence', elements: [{ type: 'regex', pattern: '[0-9]{1,3}' }, { type: 'const_string', value: ARGS }, { type: 'json_schema', json_schema: parametersOf(t) }] },
        end: CALL.end,
      })),
      separator: CALL.begin,
      at_least_one: true,
      stop_after_first: !parallel,
    },
    end: SECTION.end,
  }),
  trigger: SECTION.begin,
  newId: (index, name) => `functions.${name}:${index}`,
};
