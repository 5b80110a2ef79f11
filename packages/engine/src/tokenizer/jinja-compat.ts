/**
 * Where @huggingface/jinja differs from Python's jinja2 (as transformers renders chat templates), made
 * to behave as jinja2 does, at the one place filters are applied:
 *
 *   - A filter on an undefined value: jinja2's Undefined is '' as a string, empty as a sequence and
 *     a mapping, and 0 long, so `param.description | trim` is '' (Hermes 3 renders tools whose
 *     parameters have no description this way) where the library throws "Cannot apply filter".
 *   - `select` / `reject` with a test (`builtin_tools | reject('equalto', 'code_interpreter')`, Llama
 *     3.1 with built-in tools), which the library does not have.
 *   - A for loop over an undefined name is empty (Hermes 3 loops over `tools` without a test).
 *   - `{{ x }}` with x None prints "None" in jinja2 (GLM-4.6 prints a tool-calling turn's null
 *     content so); the library prints nothing. Statements (set, if, for, macro...) still print nothing.
 *   - `select`, `reject`, `selectattr`, `rejectattr` and `map` of none are empty, as jinja2's generators
 *     skip a false operand (Functionary v3.1 filters `tools` after setting it to none).
 *   - `"text"|safe + value` escapes value as HTML, as jinja2's Markup does on `+` (Functionary v3.1
 *     prints each tool's JSON so: `&#34;name&#34;`, which is what transformers gives that model).
 *   - `for a, b in [(x, y), ...]` unpacks tuples (Functionary v3.2), not only lists.
 *   - Dict literals with integer keys (Seed-OSS's `{0: 0, 512: 128, ...}` budget table), which the
 *     library refuses ("Object keys must be strings"): the keys stay integers through `d[512]`,
 *     `d.get(512)`, `items` and `dictsort` (sorted as numbers), as in Python.
 *
 * Importing this module installs it once; templates compiled before or after behave the same.
 */
import { Interpreter } from '@huggingface/jinja';

type Node = { type: string; value?: unknown; callee?: { type: string; value?: unknown }; args?: Node[] };
type Value = { type: string; value?: unknown; __bool__?: () => { value: boolean } };
type Env = { tests: Map<string, (...args: Value[]) => boolean> };
interface Internals {
  applyFilter(operand: Value, filter: Node, env: unknown): Value;
  evaluate(node: Node, env: unknown): Value;
  evaluateMemberExpression(node: MemberNode, env: unknown): Value;
  evaluateBinaryExpression(node: Node & { left: Node; right: Node; operator: { value: string } }, env: unknown): Value;
  evaluateBlock(statements: Node[], env: unknown): Value;
  evaluateFor(node: ForNode, env: unknown): Value;
}
type ForNode = Node & { iterable: Node & { lhs?: Node } };
type MemberNode = Node & { object: Node; property: Node; computed: boolean };
/** A dict whose keys are not all strings: each JS key (string or number) with the value it was written as. */
type KeyedObject = Value & { value: Map<unknown, Value>; keyValues: Map<unknown, Value>; builtins: Map<string, Value> };
/** An already evaluated value standing in an expression's place (so nothing is evaluated twice). */
const VALUE_NODE = 'OrchardValue';
const EMPTY: Node = { type: 'ArrayLiteral', value: [] };

/** Nodes that are statements, not expressions: their null result is not output. */
const STATEMENTS = new Set(['Program', 'If', 'For', 'Break', 'Continue', 'Set', 'Macro', 'Comment', 'FilterStatement', 'CallStatement']);

/** Filters that read their operand as a string: an undefined one is ''. */
const STRING_FILTERS = new Set(['trim', 'string', 'upper', 'lower', 'title', 'capitalize', 'indent', 'join', 'length']);
/** Filters that yield nothing for a false operand in jinja2 (`if value: for item in value`): none or undefined is empty. */
const FILTERS_OF_TRUTHY = new Set(['select', 'reject', 'selectattr', 'rejectattr', 'map']);
/** Filters that iterate their operand: an undefined one is empty. */
const SEQUENCE_FILTERS = new Set(['items', 'list', 'reverse', 'sort', 'unique']);

const INSTALLED = Symbol.for('orchard.jinja-compat');

function filterName(f: Node): string | null {
  if (f.type === 'Identifier') return String(f.value);
  if (f.type === 'CallExpression' && f.callee?.type === 'Identifier') return String(f.callee.value);
  return null;
}

/** Marks a string as jinja2's Markup (the result of `safe`): what is added to it is escaped. */
const MARKUP = Symbol('orchard.markup');
type Markup = Value & { [MARKUP]?: true };

function escapeHtml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&#34;').replace(/'/g, '&#39;');
}

function markup(self: Internals, text: string, env: unknown): Markup {
  const v = self.evaluate({ type: 'StringLiteral', value: text }, env) as Markup;
  v[MARKUP] = true;
  return v;
}

function isKeyed(v: Value | undefined): v is KeyedObject {
  return !!v && v.type === 'ObjectValue' && (v as Partial<KeyedObject>).keyValues instanceof Map;
}

/** Python orders numbers among themselves and strings among themselves; mixing them is an error there too. */
function compareKeys(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a.toLowerCase() < b.toLowerCase() ? -1 : a.toLowerCase() > b.toLowerCase() ? 1 : 0;
  throw new Error(`'<' not supported between dict keys ${typeof a} and ${typeof b}`);
}

/**
 * A dict literal built as the library builds one, except that integer, float and boolean keys are
 * kept (as JS numbers and booleans in the map, so 512 and '512' stay two keys as in Python).
 */
function objectLiteral(self: Internals, node: Node, env: unknown, ObjectValue: new (m: Map<unknown, Value>) => Value): Value {
  const entries = [...(node.value as Map<Node, Node>)].map(([k, v]) => [self.evaluate(k, env), self.evaluate(v, env)] as const);
  const make = (m: Map<unknown, Value>) => new ObjectValue(m);
  if (entries.every(([k]) => k.type === 'StringValue')) return make(new Map(entries.map(([k, v]) => [k.value, v])));
  const keyValues = new Map<unknown, Value>();
  for (const [k] of entries) {
    if (!['StringValue', 'IntegerValue', 'FloatValue', 'BooleanValue'].includes(k.type)) throw new Error(`Object keys must be strings or numbers: got ${k.type}`);
    keyValues.set(k.value, k);
  }
  const obj = make(new Map(entries.map(([k, v]) => [k.value, v]))) as KeyedObject;
  obj.keyValues = keyValues;
  const pairs = (sorted: boolean) => {
    const keys = [...obj.value.keys()];
    if (sorted) keys.sort(compareKeys);
    return self.evaluate({ type: 'ArrayLiteral', value: keys.map((k) => ({ type: 'ArrayLiteral', value: [{ type: VALUE_NODE, value: keyValues.get(k) }, { type: VALUE_NODE, value: obj.value.get(k) }] })) }, env);
  };
  const fn = obj.builtins.get('items')!.constructor as new (f: (args: Value[]) => Value) => Value;
  (obj as unknown as { items: () => Value }).items = () => pairs(false);
  (obj as unknown as { keys: () => Value }).keys = () => self.evaluate({ type: 'ArrayLiteral', value: [...keyValues.values()].map((value) => ({ type: VALUE_NODE, value })) }, env);
  obj.builtins.set('dictsort', new fn(() => pairs(true)));
  obj.builtins.set('get', new fn(([key, fallback]) => obj.value.get(key?.value) ?? fallback ?? self.evaluate({ type: 'Identifier', value: 'none' }, env)));
  return obj;
}

export function installJinjaCompat(): void {
  const proto = Interpreter.prototype as unknown as Internals & { [INSTALLED]?: true };
  if (proto[INSTALLED]) return;
  const original = proto.applyFilter;
  const originalFor = proto.evaluateFor;
  const originalEvaluate = proto.evaluate;
  const originalMember = proto.evaluateMemberExpression;
  const originalBinary = proto.evaluateBinaryExpression;
  let ObjectValue: (new (m: Map<unknown, Value>) => Value) | undefined;
  if (typeof original !== 'function' || typeof proto.evaluate !== 'function' || typeof proto.evaluateBlock !== 'function' || typeof originalFor !== 'function' || typeof originalMember !== 'function' || typeof originalBinary !== 'function') throw new Error('@huggingface/jinja changed: Interpreter.applyFilter / evaluate are gone (see tokenizer/jinja-compat.ts)');
  proto.evaluate = function (this: Internals, node, env) {
    if (node?.type === VALUE_NODE) return node.value as Value;
    if (node?.type === 'ObjectLiteral') {
      ObjectValue ??= originalEvaluate.call(this, { type: 'ObjectLiteral', value: new Map() }, env).constructor as new (m: Map<unknown, Value>) => Value;
      return objectLiteral(this, node, env, ObjectValue);
    }
    return originalEvaluate.call(this, node, env);
  };
  proto.evaluateMemberExpression = function (this: Internals, node, env) {
    const object = this.evaluate(node.object, env);
    if (isKeyed(object) && node.computed && node.property.type !== 'SliceExpression') {
      const key = this.evaluate(node.property, env);
      return object.value.get(key.value) ?? object.builtins.get(String(key.value)) ?? this.evaluate({ type: 'Identifier', value: '\u0000undefined' }, env);
    }
    return originalMember.call(this, { ...node, object: { type: VALUE_NODE, value: object } }, env);
  };
  proto.evaluateBinaryExpression = function (this: Internals, node, env) {
    const op = node.operator.value;
    if (op !== '+' && op !== 'in' && op !== 'not in') return originalBinary.call(this, node, env);
    const left = this.evaluate(node.left, env) as Markup;
    const right = this.evaluate(node.right, env) as Markup;
    if (op !== '+' && isKeyed(right)) return this.evaluate({ type: 'Identifier', value: right.value.has(left.value) === (op === 'in') ? 'true' : 'false' }, env);
    const text = (v: Markup) => (v[MARKUP] ? String(v.value) : escapeHtml(String(v.value)));
    if ((left[MARKUP] || right[MARKUP]) && left.type === 'StringValue' && right.type === 'StringValue') return markup(this, text(left) + text(right), env);
    return originalBinary.call(this, { ...node, left: { type: VALUE_NODE, value: left }, right: { type: VALUE_NODE, value: right } }, env);
  };
  proto.applyFilter = function (this: Internals, operand, filter, env) {
    if (filterName(filter) === 'safe' && operand?.type === 'StringValue') return markup(this, String(operand.value), env);
    if (isKeyed(operand) && filterName(filter) === 'items') return (operand as unknown as { items: () => Value }).items();
    if ((operand?.type === 'UndefinedValue' || operand?.type === 'NullValue') && FILTERS_OF_TRUTHY.has(filterName(filter) ?? '')) return this.evaluate({ type: 'ArrayLiteral', value: [] }, env);
    if (operand?.type === 'UndefinedValue') {
      const name = filterName(filter);
      if (name && STRING_FILTERS.has(name)) return original.call(this, this.evaluate({ type: 'StringLiteral', value: '' }, env), filter, env);
      if (name && SEQUENCE_FILTERS.has(name)) return this.evaluate({ type: 'ArrayLiteral', value: [] }, env);
    }
    const name = filterName(filter);
    if ((name === 'select' || name === 'reject') && operand?.type === 'ArrayValue') {
      const [test, ...args] = (filter.args ?? []).map((a) => this.evaluate(a, env));
      const fn = test ? (env as Env).tests.get(String(test.value)) : (v: Value) => v.__bool__!().value;
      if (!fn) throw new Error(`Unknown test: ${String(test?.value)}`);
      const kept = (operand.value as Value[]).filter((v) => fn(v, ...args) === (name === 'select'));
      return new (operand.constructor as new (v: Value[]) => Value)(kept);
    }
    return original.call(this, operand, filter, env);
  };
  proto.evaluateBlock = function (this: Internals, statements, env) {
    let out = '';
    for (const statement of statements) {
      const v = this.evaluate(statement, env);
      if (v.type === 'UndefinedValue') continue;
      if (v.type === 'NullValue') {
        if (!STATEMENTS.has(statement.type)) out += 'None';
        continue;
      }
      out += String(v);
    }
    return this.evaluate({ type: 'StringLiteral', value: out }, env);
  };
  proto.evaluateFor = function (this: Internals, node, env) {
    // A literal list of tuples: read each tuple as a list (the library unpacks lists only).
    const loopvar = (node as ForNode & { loopvar?: Node }).loopvar;
    if (loopvar?.type === 'TupleLiteral' && node.iterable.type === 'ArrayLiteral' && (node.iterable.value as Node[]).some((x) => x.type === 'TupleLiteral')) {
      node = { ...node, iterable: { ...node.iterable, value: (node.iterable.value as Node[]).map((x) => (x.type === 'TupleLiteral' ? { ...x, type: 'ArrayLiteral' } : x)) } };
    }
    const select = node.iterable.type === 'SelectExpression';
    const source = select ? node.iterable.lhs! : node.iterable;
    // Only a name or member is looked at twice (no calls: nothing with side effects is evaluated again).
    if ((source.type === 'Identifier' || source.type === 'MemberExpression') && this.evaluate(source, env).type === 'UndefinedValue') {
      return originalFor.call(this, { ...node, iterable: select ? { ...node.iterable, lhs: EMPTY } : EMPTY } as ForNode, env);
    }
    return originalFor.call(this, node, env);
  };
  proto[INSTALLED] = true;
}

installJinjaCompat();
