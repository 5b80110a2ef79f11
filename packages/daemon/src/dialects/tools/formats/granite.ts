/**
 * IBM Granite 3.x: the reply is <|tool_call|> and then a JSON list of {"name", "arguments"}, as its
 * system prompt tells the model. Its template never writes past calls, so they go back to it in the
 * assistant's content, written the same way.
 */
import { parametersOf, type ToolCallFormat } from '../format.js';
import { jsonListParser } from '../json-list.js';

const MARK = '<|tool_call|>';

export const granite: ToolCallFormat = {
  name: 'granite',
  detect: (t) => t.includes(MARK),
  parser: (newId) =>
    jsonListParser(
      {
        marker: MARK,
        read: (o) => (typeof o.name === 'string' ? { name: o.name, arguments: o.arguments ?? o.parameters ?? {} } : null),
      },
      newId,
    ),
  grammar: (tools, parallel) => ({
    type: 'tag',
    begin: `${MARK}[`,
    content: {
      type: 'tags_with_separator',
      tags: tools.map((t) => ({ type: 'tag', begin: `{"name": ${JSON.stringify(t.function.name)}, "arguments": `, content: { type: 'json_schema', json_schema: parametersOf(t) }, end: '}' })),
      separator: ', ',
      at_least_one: true,
      stop_after_first: !parallel,
    },
    end: ']',
  }),
  callsAsContent: (calls) => `${MARK}${JSON.stringify(calls.map((c) => ({ name: c.name, arguments: JSON.parse(c.arguments) as unknown })))}`,
};
