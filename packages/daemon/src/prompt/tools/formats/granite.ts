/**
 * IBM Granite 3.x: the reply is <|tool_call|> and then a JSON list of {"name", "arguments"}, as its
 * system prompt tells the model. Its template never writes past calls, so they go back to it in the
 * assistant's content, written the same way.
 */
import { pythonJson } from '@orchard/engine';
import type { ToolCallFormat } from '../format.js';
import { jsonListParser, namedArgumentsList } from '../json-list.js';

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
  grammar: (tools, parallel) => namedArgumentsList(MARK, tools, parallel),
  trigger: MARK,
  // As Python's json.dumps writes it (", " and ": "), the spacing of the grammar above.
  callsAsContent: (calls) => `${MARK}${pythonJson(calls.map((c) => ({ name: c.name, arguments: JSON.parse(c.arguments) as unknown })))}`,
};
