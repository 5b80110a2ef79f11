/**
 * Llama 3.1-3.3 (JSON tool calling): the whole reply is a JSON object {"name", "parameters"},
 * sometimes after <|python_tag|>, several separated by ";" — or it is ordinary text. Text that starts
 * with "{" is held until the object is whole; if it is not a call, it is content after all.
 */
import type { ReplyEvent, ReplyParser } from '../events.js';
import { parametersOf, type ToolCallFormat } from '../format.js';
import { argumentsJson, jsonValueEnd, tryJson } from '../scan.js';

const TAG = '<|python_tag|>';

function parser(newId: (index: number, name: string) => string): ReplyParser {
  let mode: 'start' | 'calls' | 'text' = 'start';
  let buf = '';
  let index = 0;
  const run = (final: boolean): ReplyEvent[] => {
    const events: ReplyEvent[] = [];
    for (;;) {
      if (mode === 'text') {
        events.push({ type: 'content', text: buf });
        buf = '';
        return events;
      }
      const lead = buf.replace(/^\s+/, '');
      if (mode === 'start') {
        if (!lead || (!final && TAG.startsWith(lead))) return events;
        if (lead.startsWith(TAG)) buf = lead.slice(TAG.length);
        else if (lead[0] !== '{') {
          mode = 'text';
          continue;
        }
        mode = 'calls';
        continue;
      }
      // calls: one JSON object after another, ";" or whitespace between
      const rest = buf.replace(/^[\s;]+/, '');
      if (!rest) return events;
      const end = jsonValueEnd(rest);
      if (end === -1 && !final) return events;
      const o = end > 0 ? (tryJson(rest.slice(0, end)) as { name?: unknown; parameters?: unknown; arguments?: unknown } | undefined) : undefined;
      const args = o && typeof o === 'object' ? argumentsJson(o.parameters ?? o.arguments ?? {}) : null;
      if (!o || typeof o.name !== 'string' || !o.name || args === null) {
        mode = 'text';
        continue;
      }
      events.push({ type: 'tool_call', index, call: { id: newId(index, o.name), name: o.name, arguments: args } });
      index++;
      buf = rest.slice(end);
    }
  };
  return {
    push: (text) => ((buf += text), run(false).filter((e) => e.type === 'tool_call' || e.text)),
    end: () => run(true).filter((e) => e.type === 'tool_call' || e.text),
  };
}

export const llama3: ToolCallFormat = {
  name: 'llama3-json',
  detect: (t) => t.includes('<|start_header_id|>') && t.includes('"parameters"'),
  parser,
  // The templates render one call per assistant message (they raise on more): never parallel.
  grammar: (tools) => ({
    type: 'or',
    elements: tools.map((t) => ({ type: 'tag', begin: `{"name": ${JSON.stringify(t.function.name)}, "parameters": `, content: { type: 'json_schema', json_schema: parametersOf(t) }, end: '}' })),
  }),
};
