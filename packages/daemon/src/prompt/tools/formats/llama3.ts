/**
 * Llama 3.1-3.3 (JSON tool calling): the whole reply is a JSON object {"name", "parameters"},
 * sometimes after <|python_tag|>, several separated by ";" — or it is ordinary text. Text that starts
 * with "{" is held until the object is whole; if it is not a call, it is content after all. After
 * <|python_tag|>, a built-in tool's call `brave_search.call(query="...")` is read too.
 */
import type { ReplyEvent, ReplyParser } from '../../../requests/reply.js';
import { parametersOf, type ToolCallFormat } from '../format.js';
import { argumentsJson, jsonValueEnd, tryJson } from '../scan.js';

const TAG = '<|python_tag|>';

/**
 * `NAME.call(k="v", n=1, flag=True)` at the start of `text`, as Llama 3.1 writes a built-in tool call
 * after <|python_tag|> (its template writes past ones so): the call, 'partial' while it may still
 * be one, or null when it is not (then the reply is text).
 */
export function builtinCall(text: string): { name: string; args: Record<string, unknown>; end: number } | 'partial' | null {
  const head = /^([A-Za-z_]\w*)(\.(c(a(l(l(\()?)?)?)?)?)?/.exec(text)!;
  if (head[0].length === text.length) return 'partial';
  if (!head[7]) return null;
  const args: Record<string, unknown> = {};
  let i = head[0].length;
  const skip = () => {
    while (i < text.length && /\s/.test(text[i])) i++;
  };
  for (;;) {
    skip();
    if (i >= text.length) return 'partial';
    if (text[i] === ')') return { name: head[1], args, end: i + 1 };
    const key = /^([A-Za-z_]\w*)\s*=/.exec(text.slice(i));
    if (!key) return /^[A-Za-z_]\w*\s*$/.test(text.slice(i)) ? 'partial' : null;
    i += key[0].length;
    skip();
    if (i >= text.length) return 'partial';
    const q = text[i];
    if (q === '"' || q === "'") {
      let j = i + 1;
      let value = '';
      for (; j < text.length && text[j] !== q; j++) {
        if (text[j] === '\\' && j + 1 < text.length) value += text[++j] === 'n' ? '\n' : text[j];
        else value += text[j];
      }
      if (j >= text.length) return 'partial';
      args[key[1]] = value;
      i = j + 1;
    } else {
      const lit = /^[^,)\s]+/.exec(text.slice(i));
      if (!lit) return null;
      if (i + lit[0].length >= text.length) return 'partial';
      const word = lit[0];
      const value = word === 'True' ? true : word === 'False' ? false : word === 'None' ? null : Number(word);
      if (typeof value === 'number' && !Number.isFinite(value)) return null;
      args[key[1]] = value;
      i += word.length;
    }
    skip();
    if (text[i] === ',') i++;
    else if (i < text.length && text[i] !== ')') return null;
  }
}

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
      // A built-in tool (Llama 3.1's brave_search, wolfram_alpha): NAME.call(key="value", ...).
      if (/^[A-Za-z_]/.test(rest)) {
        const call = builtinCall(rest);
        if (call === 'partial' && !final) return events;
        if (call === 'partial' || call === null) {
          mode = 'text';
          continue;
        }
        events.push({ type: 'tool_call', index, call: { id: newId(index, call.name), name: call.name, arguments: JSON.stringify(call.args) } });
        index++;
        buf = rest.slice(call.end);
        continue;
      }
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
