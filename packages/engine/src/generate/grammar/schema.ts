/**
 * JSON-schema rewrites applied before xgrammar compiles a schema, each for a place where xgrammar
 * 0.1.27's grammar would let through values the schema forbids.
 *
 * Bounded integers: its range grammar treats the maximum's lower digits as 9s ("maximum": 120 admits
 * 121-129). A range of at most MAX_ENUM values becomes the `enum` of exactly those integers.
 */
/** A JSON schema as a request carries it: `true`/`false` or a schema object. */
export type JsonSchema = boolean | Record<string, unknown>;

export const MAX_ENUM = 4096;

/** Keys whose values are data, not subschemas. */
const DATA_KEYS = new Set(['enum', 'const', 'default', 'examples', 'description', 'title', 'pattern', 'format', 'required']);

function bound(v: unknown, exclusive: unknown, dir: 1 | -1): number | null {
  const inc = typeof v === 'number' ? (dir === 1 ? Math.ceil(v) : Math.floor(v)) : null;
  const exc = typeof exclusive === 'number' ? (dir === 1 ? Math.floor(exclusive) + 1 : Math.ceil(exclusive) - 1) : null;
  if (inc === null) return exc;
  if (exc === null) return inc;
  return dir === 1 ? Math.max(inc, exc) : Math.min(inc, exc);
}

export function rewriteSchema(schema: JsonSchema): JsonSchema {
  if (typeof schema !== 'object' || schema === null) return schema;
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (!v || typeof v !== 'object') return v;
    const o: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) o[k] = DATA_KEYS.has(k) ? x : walk(x);
    if (o.type === 'integer' && !('enum' in o) && !('const' in o)) {
      const lo = bound(o.minimum, o.exclusiveMinimum, 1);
      const hi = bound(o.maximum, o.exclusiveMaximum, -1);
      if (lo !== null && hi !== null && hi >= lo && hi - lo < MAX_ENUM && Number.isSafeInteger(lo) && Number.isSafeInteger(hi)) {
        const { minimum, maximum, exclusiveMinimum, exclusiveMaximum, ...rest } = o;
        void minimum, void maximum, void exclusiveMinimum, void exclusiveMaximum;
        return { ...rest, enum: Array.from({ length: hi - lo + 1 }, (_, i) => lo + i) };
      }
    }
    return o;
  };
  return walk(schema) as JsonSchema;
}
