/**
 * Cohere Command R / R+ (tool_use template): the reply is "Action:" and a fenced JSON list of
 * {"tool_name", "parameters"}, as the template's closing instruction asks and as it writes past calls:
 *   Action:
 *   ```json
 *   [
 *       {"tool_name": "NAME", "parameters": {...}}
 *   ]```
 * The template also offers a `directly-answer` pseudo-tool: choosing it is no call.
 */
import { parametersOf, type ToolCallFormat } from '../format.js';
import { jsonListParser } from '../json-list.js';

const MARK = 'Action:';
const DIRECT = new Set(['directly-answer', 'directly_answer']);

export const commandR: ToolCallFormat = {
  name: 'command-r',
  detect: (t) => t.includes(MARK) && t.includes('"tool_name"'),
  parser: (newId, tools) =>
    jsonListParser(
      {
        marker: MARK,
        fence: { open: '```json', close: '```' },
        read(o) {
          if (typeof o.tool_name !== 'string') return null;
          if (DIRECT.has(o.tool_name) && !tools?.some((t) => t.function.name === o.tool_name)) return 'skip';
          return { name: o.tool_name, arguments: o.parameters ?? {} };
        },
      },
      newId,
    ),
  grammar: (tools, parallel) => ({
    type: 'tag',
    begin: `${MARK}\n\`\`\`json\n[\n`,
    content: {
      type: 'tags_with_separator',
      tags: tools.map((t) => ({
        type: 'tag',
        begin: `    {\n        "tool_name": ${JSON.stringify(t.function.name)},\n        "parameters": `,
        content: { type: 'json_schema', json_schema: parametersOf(t) },
        end: '\n    }',
      })),
      separator: ',\n',
      at_least_one: true,
      stop_after_first: !parallel,
    },
    end: '\n]```',
  }),
  trigger: MARK,
};
