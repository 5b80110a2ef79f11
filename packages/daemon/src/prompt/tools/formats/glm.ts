/**
 * GLM-4.5 / 4.6: each call is the function's name after <tool_call>, then its arguments as key and
 * value pairs, up to </tool_call>:
 *   <tool_call>NAME
 *   <arg_key>KEY</arg_key>
 *   <arg_value>value (text, or JSON for non-strings)</arg_value>
 *   </tool_call>
 */
import type { ToolCallFormat } from '../format.js';
import { keyValueFormat } from './xml-values.js';

const BEGIN = '<tool_call>';
const END = '</tool_call>';

export function readGlmCall(body: string): { name: string; pairs: [string, string][] } | null {
  const at = body.indexOf('<arg_key>');
  const name = (at < 0 ? body : body.slice(0, at)).trim();
  if (!name || /[\s<>]/.test(name)) return null;
  const pairs: [string, string][] = [];
  const rest = (at < 0 ? '' : body.slice(at)).replace(/<arg_key>([\s\S]*?)<\/arg_key>\s*<arg_value>([\s\S]*?)<\/arg_value>/g, (_m, k: string, v: string) => {
    pairs.push([k.trim(), v]);
    return '';
  });
  return rest.trim() ? null : { name, pairs };
}

export const glm: ToolCallFormat = keyValueFormat({
  name: 'glm-4.5',
  detect: (t) => t.includes('<arg_key>') && t.includes('<arg_value>') && t.includes(BEGIN),
  call: { begin: BEGIN, end: END },
  read: readGlmCall,
  write: { begin: (name) => `${BEGIN}${name}\n`, key: (k) => `<arg_key>${k}</arg_key>\n<arg_value>`, close: '</arg_value>\n', end: END },
});
