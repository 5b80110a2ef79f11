/**
 * Hermes / Qwen 2.5-3: each call is a JSON object {"name", "arguments"} between <tool_call> and
 * </tool_call> lines, several in a row for parallel calls.
 */
import { delimitedParser } from '../delimited.js';
import { parametersOf, type ToolCallFormat } from '../format.js';
import { argumentsJson, tryJson } from '../scan.js';

const BEGIN = '<tool_call>';
const END = '</tool_call>';

export const hermes: ToolCallFormat = {
  name: 'hermes',
  // A JSON object with "name" inside <tool_call> (other formats use the same tag with other insides).
  detect: (t) => t.includes(BEGIN) && t.includes('"name"'),
  parser: (newId) =>
    delimitedParser(
      {
        call: { begin: BEGIN, end: END },
        read(body) {
          const o = tryJson(body.trim()) as { name?: unknown; arguments?: unknown; parameters?: unknown } | undefined;
          if (!o || typeof o !== 'object' || typeof o.name !== 'string' || !o.name) return null;
          const args = argumentsJson(o.arguments ?? o.parameters ?? {});
          return args === null ? null : { name: o.name, arguments: args };
        },
      },
      newId,
    ),
  grammar: (tools, parallel) => ({
    type: 'tags_with_separator',
    tags: tools.map((t) => ({
      type: 'tag',
      begin: `${BEGIN}\n{"name": ${JSON.stringify(t.function.name)}, "arguments": `,
      content: { type: 'json_schema', json_schema: parametersOf(t) },
      end: `}\n${END}`,
    })),
    separator: '\n',
    at_least_one: true,
    stop_after_first: !parallel,
  }),
  trigger: BEGIN,
};
