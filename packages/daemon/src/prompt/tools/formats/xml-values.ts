/**
 * Arguments written as key and value apart (Qwen3-Coder's <parameter=KEY>, GLM's <arg_key>): the
 * templates print a string as it is and anything else as JSON, so a value is read back by the
 * parameter's schema type — a string stays text ("42" for a string parameter is "42"), other types
 * parse as JSON, and a value that does not parse stays text.
 */
import type { JsonSchema, StructuralFormat, ToolDefinition } from '@orchard/engine';
import { delimitedParser } from '../delimited.js';
import { parametersOf, type ToolCallFormat } from '../format.js';

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

/** A format that writes each call between markers with its arguments as key and value apart. */
export interface KeyValueCalls {
  name: string;
  detect(template: string): boolean;
  call: { begin: string; end: string };
  /** One call's body (between the call markers): its name and each parameter's raw text; null if it is not one. */
  read(body: string): { name: string; pairs: [string, string][] } | null;
  /** How the template writes a call: up to and with the name, before each value, after each value, after the last. */
  write: { begin(name: string): string; key(key: string): string; close: string; end: string };
}

/** Qwen3-Coder, GLM-4.5 and Seed-OSS: one reader of key/value calls (typed by the schema), one forcing grammar. */
export function keyValueFormat(f: KeyValueCalls): ToolCallFormat {
  return {
    name: f.name,
    detect: f.detect,
    parser: (newId, tools) =>
      delimitedParser(
        {
          call: f.call,
          read(body) {
            const c = f.read(body);
            return c && { name: c.name, arguments: argumentsOf(c.pairs, tools, c.name) };
          },
        },
        newId,
      ),
    grammar: (tools, parallel) => ({
      type: 'tags_with_separator',
      tags: tools.map((t) => ({ type: 'tag', begin: f.write.begin(t.function.name), content: parameterGrammar(t, f.write.key, f.write.close), end: f.write.end })),
      separator: '\n',
      at_least_one: true,
      stop_after_first: !parallel,
    }),
    trigger: f.call.begin,
  };
}
