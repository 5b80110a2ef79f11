/**
 * Arguments written as key and value apart (Qwen3-Coder's <parameter=KEY>, GLM's <arg_key>): the
 * templates print a string as it is and anything else as JSON, so a value is read back by the
 * parameter's schema type — a string stays text ("42" for a string parameter is "42"), other types
 * parse as JSON, and a value that does not parse stays text.
 */
import type { JsonSchema, StructuralFormat, ToolDefinition } from '@orchard/engine';
import { parametersOf } from '../format.js';

type Props = Record<string, { type?: unknown } & Record<string, unknown>>;

function propertiesOf(tool: ToolDefinition | undefined): Props {
  const p = tool ? (parametersOf(tool).properties as Props | undefined) : undefined;
  return p && typeof p === 'object' ? p : {};
}

function isStringType(t: unknown): boolean {
  return t === 'string' || (Array.isArray(t) && t.length > 0 && t.every((x) => x === 'string' || x === 'null') && t.includes('string'));
}

/** One value read back: text for a string parameter (or an unknown one whose text is not JSON), else parsed JSON. */
export function readValue(text: string, schema: { type?: unknown } | undefined): unknown {
  if (schema && isStringType(schema.type)) return text;
  try {
    return JSON.parse(text);
  } catch {
    // Seed-OSS prints non-strings with Python's str(): True, False, None.
    return PYTHON_WORDS.has(text.trim()) ? PYTHON_WORDS.get(text.trim()) : text;
  }
}

const PYTHON_WORDS = new Map<string, unknown>([
  ['True', true],
  ['False', false],
  ['None', null],
]);

/** The call's arguments as JSON text, values typed by the tool's schema. */
export function argumentsOf(pairs: [string, string][], tools: ToolDefinition[] | undefined, name: string): string {
  const props = propertiesOf(tools?.find((t) => t.function.name === name));
  return JSON.stringify(Object.fromEntries(pairs.map(([k, v]) => [k, readValue(v, props[k])])));
}

/** A string value as the template prints it (raw text): one of its enum, or text of its length bounds without '<'. */
function stringGrammar(schema: Record<string, unknown>): StructuralFormat {
  if (Array.isArray(schema.enum) && schema.enum.length && schema.enum.every((v) => typeof v === 'string')) {
    return { type: 'or', elements: (schema.enum as string[]).map((value) => ({ type: 'const_string', value })) };
  }
  const min = Number.isInteger(schema.minLength) ? (schema.minLength as number) : 0;
  const max = Number.isInteger(schema.maxLength) ? (schema.maxLength as number) : null;
  return { type: 'regex', pattern: max === null ? `[^<]{${min},}` : `[^<]{${min},${max}}` };
}

/**
 * The grammar of one call's parameters, in the schema's order: every required one (and only those),
 * each as `open(key)` + value + `close`. A string value is raw text without '<' (so it cannot run
 * into the closing marker), within its enum or length bounds; others are JSON matching the schema.
 */
export function parameterGrammar(tool: ToolDefinition, open: (key: string) => string, close: string): StructuralFormat {
  const params = parametersOf(tool) as { properties?: Props; required?: string[] };
  const props = params.properties ?? {};
  const required = new Set(params.required ?? []);
  const keys = Object.keys(props).filter((k) => required.has(k));
  if (!keys.length) return { type: 'const_string', value: '' };
  return {
    type: 'sequence',
    elements: keys.flatMap((k): StructuralFormat[] => [
      { type: 'const_string', value: open(k) },
      isStringType(props[k].type) ? stringGrammar(props[k]) : { type: 'json_schema', json_schema: props[k] as JsonSchema },
      { type: 'const_string', value: close },
    ]),
  };
}
