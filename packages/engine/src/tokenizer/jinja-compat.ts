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
  evaluateBlock(statements: Node[], env: unknown): Value;
  evaluateFor(node: ForNode, env: unknown): Value;
}
type ForNode = Node & { iterable: Node & { lhs?: Node } };
const EMPTY: Node = { type: 'ArrayLiteral', value: [] };

/** Nodes that are statements, not expressions: their null result is not output. */
const STATEMENTS = new Set(['Program', 'If', 'For', 'Break', 'Continue', 'Set', 'Macro', 'Comment', 'FilterStatement', 'CallStatement']);

/** Filters that read their operand as a string: an undefined one is ''. */
const STRING_FILTERS = new Set(['trim', 'string', 'upper', 'lower', 'title', 'capitalize', 'indent', 'join', 'length']);
/** Filters that iterate their operand: an undefined one is empty. */
const SEQUENCE_FILTERS = new Set(['items', 'list', 'reverse', 'sort', 'unique']);

const INSTALLED = Symbol.for('orchard.jinja-compat');

function filterName(f: Node): string | null {
  if (f.type === 'Identifier') return String(f.value);
  if (f.type === 'CallExpression' && f.callee?.type === 'Identifier') return String(f.callee.value);
  return null;
}

export function installJinjaCompat(): void {
  const proto = Interpreter.prototype as unknown as Internals & { [INSTALLED]?: true };
  if (proto[INSTALLED]) return;
  const original = proto.applyFilter;
  const originalFor = proto.evaluateFor;
  if (typeof original !== 'function' || typeof proto.evaluate !== 'function' || typeof proto.evaluateBlock !== 'function' || typeof originalFor !== 'function') throw new Error('@huggingface/jinja changed: Interpreter.applyFilter / evaluate are gone (see tokenizer/jinja-compat.ts)');
  proto.applyFilter = function (this: Internals, operand, filter, env) {
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
