/**
 * Qwen3-Coder: each call is XML between <tool_call> and </tool_call> lines —
 *   <function=NAME>
 *   <parameter=KEY>
 *   value (text, or JSON for non-strings)
 *   </parameter>
 *   </function>
 * as its template writes calls back (and tells the model to write them).
 */
import type { ToolCallFormat } from '../format.js';
import { keyValueFormat } from './xml-values.js';

const BEGIN = '<tool_call>';
const END = '</tool_call>';

/** The body of one call: NAME and its parameters' raw text (one newline around each value is the format's). */
export function readXmlCall(body: string): { name: string; pairs: [string, string][] } | null {
  const fn = /^\s*<function=([^>\n]+)>([\s\S]*?)(<\/function>\s*)?$/.exec(body);
  if (!fn) return null;
  const name = fn[1].trim();
  const pairs: [string, string][] = [];
  const rest = fn[2].replace(/<parameter=([^>\n]+)>\n?([\s\S]*?)\n?<\/parameter>/g, (_m, k: string, v: string) => {
    pairs.push([k.trim(), v]);
    return '';
  });
  // Anything left but whitespace is not this format.
  return name && !rest.trim() ? { name, pairs } : null;
}

export const qwen3Coder: ToolCallFormat = keyValueFormat({
  name: 'qwen3-coder',
  detect: (t) => t.includes('<function=') && t.includes('<parameter=') && t.includes(BEGIN),
  call: { begin: BEGIN, end: END },
  read: readXmlCall,
  write: { begin: (name) => `${BEGIN}\n<function=${name}>\n`, key: (k) => `<parameter=${k}>\n`, close: '\n</parameter>\n', end: `</function>\n${END}` },
});
