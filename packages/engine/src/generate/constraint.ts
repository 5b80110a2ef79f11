/**
 * Constrained decoding: a grammar (a JSON schema, an EBNF grammar, or tags around JSON such as a
 * tool call's markers) turned into a mask over the vocabulary before each token is sampled, so the
 * text generated always matches it. xgrammar does the grammar work (compiling against the
 * vocabulary's token strings, a pushdown matcher, cached per-state token masks).
 *
 * A `ConstraintSpec` is plain JSON: it travels to whichever rank samples (a runner process, the
 * last pipeline stage) and is compiled there against that rank's tokenizer.
 */
import type { GrammarCompiler, TokenizerInfo } from '@mlc-ai/web-xgrammar';
import type { TokenVocabulary } from '../tokenizer/vocabulary.js';
import { type JsonSchema, rewriteSchema } from './grammar/schema.js';
import { utf8Guard } from './grammar/utf8.js';
import { loadXgrammar, type XgrammarInstance } from './grammar/xgrammar.js';

export type { JsonSchema };

export interface TagFormat {
  type: 'tag';
  begin: string;
  content: StructuralFormat;
  end: string;
}

/** xgrammar's structural-tag formats (text, tags and JSON composed), as plain JSON. */
export type StructuralFormat =
  | { type: 'const_string'; value: string }
  | { type: 'json_schema'; json_schema: JsonSchema }
  | { type: 'any_text' }
  | { type: 'grammar'; grammar: string }
  | { type: 'regex'; pattern: string }
  | { type: 'sequence'; elements: StructuralFormat[] }
  | { type: 'or'; elements: StructuralFormat[] }
  | TagFormat
  /** Free text until a trigger starts one of the tags (tool calls in `auto` mode). */
  | { type: 'triggered_tags'; triggers: string[]; tags: TagFormat[]; at_least_one?: boolean; stop_after_first?: boolean }
  /** One or more tags in a row (tool calls in `required` mode). */
  | { type: 'tags_with_separator'; tags: TagFormat[]; separator: string; at_least_one?: boolean; stop_after_first?: boolean };

export type ConstraintSpec =
  /** The whole output is one JSON value matching the schema (one line, ", " and ": " separators). */
  | { type: 'json_schema'; schema: JsonSchema }
  /** xgrammar EBNF with a `root` rule. */
  | { type: 'grammar'; ebnf: string }
  /**
   * `optional`: the runner may drop it when it cannot be compiled (the lazy tool-call grammar of
   * tool_choice auto: without it the reply is free and still read, only not held to the format).
   */
  | { type: 'structural'; format: StructuralFormat; optional?: boolean };

export class ConstraintError extends Error {
  override name = 'ConstraintError';
}

/** A compiled constraint for one sequence: mask, sample, accept, repeat. */
export interface TokenConstraint {
  /** Sets the logits of tokens the grammar does not allow next to -Infinity. */
  mask(logits: Float32Array): Promise<void>;
  /** Advances past the sampled id; throws ConstraintError if the grammar did not allow it. */
  accept(id: number): void;
  /** A stop token ended the grammar. */
  readonly done: boolean;
  /** Frees the matcher (WebAssembly memory). */
  dispose(): void;
}

export interface CompileOptions {
  /** Logit count (config vocab_size; may exceed the tokenizer's ids: the rest are never allowed). */
  vocabSize: number;
  /** Ids that end generation; allowed only where the grammar may end. */
  stopIds: number[];
}

/** Checks a spec's shape (it may come off the wire) and returns it typed. */
export function parseConstraintSpec(v: unknown): ConstraintSpec {
  const o = v as Record<string, unknown> | null;
  if (!o || typeof o !== 'object') throw new ConstraintError('constraint: expected an object');
  if (o.type === 'json_schema' && (typeof o.schema === 'boolean' || (o.schema !== null && typeof o.schema === 'object' && !Array.isArray(o.schema)))) return o as ConstraintSpec;
  if (o.type === 'grammar' && typeof o.ebnf === 'string') return o as ConstraintSpec;
  if (o.type === 'structural' && o.format && typeof o.format === 'object') return o as ConstraintSpec;
  throw new ConstraintError(`constraint: unknown or malformed type ${JSON.stringify(o.type)}`);
}

interface Compilers {
  info: TokenizerInfo;
  compiler: GrammarCompiler;
}

/** The live xgrammar instance, replaced after a bad schema or grammar aborted it. */
let instance: XgrammarInstance | null = null;
/**
 * Per instance, per vocabulary, per (logit count, stop ids, special tokens the grammar may write):
 * the preprocessed vocabulary and its compiler (which caches grammars).
 */
const compilers = new WeakMap<XgrammarInstance, WeakMap<TokenVocabulary, Map<string, Promise<Compilers>>>>();

function current(): XgrammarInstance {
  return (instance ??= loadXgrammar());
}

function compilerFor(x: XgrammarInstance, vocab: TokenVocabulary, o: CompileOptions, writable: number[]): Promise<Compilers> {
  let byVocab = compilers.get(x);
  if (!byVocab) compilers.set(x, (byVocab = new WeakMap()));
  let byKey = byVocab.get(vocab);
  if (!byKey) byVocab.set(vocab, (byKey = new Map()));
  const key = `${o.vocabSize}:${o.stopIds.join(',')}:${writable.join(',')}`;
  let p = byKey.get(key);
  if (!p) {
    // A special token the grammar does not spell out is never text: it cannot sneak into a JSON
    // string (where the reply's parser would take it for a marker).
    const tokens = vocab.tokens.slice(0, o.vocabSize).map((t, id) => (id in vocab.specials && !writable.includes(id) ? '' : t));
    while (tokens.length < o.vocabSize) tokens.push('');
    p = (async () => {
      const info = await x.xg.TokenizerInfo.createTokenizerInfo(tokens, vocab.kind, vocab.prependSpace, o.vocabSize, o.stopIds);
      return { info, compiler: await x.xg.GrammarCompiler.createGrammarCompiler(info, true) };
    })();
    p.catch(() => byKey!.delete(key));
    byKey.set(key, p);
  }
  return p;
}

/**
 * xgrammar 0.1.27 writes a string with minLength/maxLength as `[^\"\\\r\n]` repeats, which lets raw
 * control characters (invalid inside JSON strings) through; its unbounded strings exclude them.
 */
const LENGTH_LIMITED_CHAR = '[^\\"\\\\\\r\\n]';
const JSON_STRING_CHAR = '[^\\0-\\x1f\\"\\\\\\r\\n]';

/** JSON as one line with ", " and ": " (no free whitespace for a sampler to wander in), as EBNF. */
async function compactJson(x: XgrammarInstance, schema: JsonSchema): Promise<string> {
  const g = await x.xg.Grammar.fromJSONSchema(JSON.stringify(rewriteSchema(schema)), false, -1, undefined, true);
  try {
    return g.toString().split(LENGTH_LIMITED_CHAR).join(JSON_STRING_CHAR);
  } finally {
    g.dispose();
  }
}

/** The format with every JSON schema inside replaced by its compact grammar. */
async function compactFormat(x: XgrammarInstance, f: StructuralFormat): Promise<StructuralFormat> {
  switch (f.type) {
    case 'json_schema':
      return { type: 'grammar', grammar: await compactJson(x, f.json_schema) };
    case 'sequence':
    case 'or':
      return { ...f, elements: await Promise.all(f.elements.map((e) => compactFormat(x, e))) };
    case 'tag':
      return { ...f, content: await compactFormat(x, f.content) };
    case 'triggered_tags':
    case 'tags_with_separator':
      return { ...f, tags: (await Promise.all(f.tags.map((t) => compactFormat(x, t)))) as TagFormat[] };
    default:
      return f;
  }
}

/** The literal strings a spec writes (tag markers, constants, separators). */
function literals(spec: ConstraintSpec): string[] {
  if (spec.type === 'grammar') return [spec.ebnf];
  const out: string[] = [];
  const walk = (f: StructuralFormat) => {
    switch (f.type) {
      case 'const_string':
        out.push(f.value);
        return;
      case 'sequence':
      case 'or':
        f.elements.forEach(walk);
        return;
      case 'tag':
        out.push(f.begin, f.end);
        walk(f.content);
        return;
      case 'triggered_tags':
        out.push(...f.triggers);
        f.tags.forEach(walk);
        return;
      case 'tags_with_separator':
        out.push(f.separator);
        f.tags.forEach(walk);
        return;
      case 'grammar':
        out.push(f.grammar);
        return;
      default:
        return;
    }
  };
  if (spec.type === 'structural') walk(spec.format);
  return out;
}

/** The spec lets the model write free text somewhere (outside the tags it watches for). */
function hasFreeText(spec: ConstraintSpec): boolean {
  const walk = (f: StructuralFormat): boolean => {
    switch (f.type) {
      case 'any_text':
      case 'triggered_tags':
        return true;
      case 'sequence':
      case 'or':
        return f.elements.some(walk);
      case 'tag':
        return walk(f.content);
      case 'tags_with_separator':
        return f.tags.some(walk);
      default:
        return false;
    }
  };
  return spec.type === 'structural' && walk(spec.format);
}

/**
 * `compileConstraint`, except that an optional spec (the lazy tool-call grammar of `tool_choice: auto`)
 * that cannot be compiled gives null — the reply is then read unconstrained — after `dropped` is told why.
 * Every other failure is thrown as compileConstraint throws it.
 */
export async function compileConstraintOrDrop(
  spec: ConstraintSpec,
  vocab: TokenVocabulary,
  o: CompileOptions,
  dropped: (reason: string) => void = () => {},
): Promise<TokenConstraint | null> {
  try {
    return await compileConstraint(spec, vocab, o);
  } catch (err) {
    if (!(spec.type === 'structural' && spec.optional && err instanceof ConstraintError)) throw err;
    dropped(err.message);
    return null;
  }
}

/** Compiles `spec` against the vocabulary: the result constrains one sequence. */
export async function compileConstraint(spec: ConstraintSpec, vocab: TokenVocabulary, o: CompileOptions): Promise<TokenConstraint> {
  const x = current();
  const written = literals(spec);
  // Where the reply is free text (tool calls in auto mode), any special token the model writes there
  // (a reasoning marker such as Seed-OSS's </seed:think>) stays allowed, as with no constraint at all.
  const free = hasFreeText(spec);
  const writable = Object.entries(vocab.specials)
    .filter(([, text]) => free || written.some((l) => l.includes(text)))
    .map(([id]) => Number(id));
  const { compiler } = await compilerFor(x, vocab, o, writable);
  let compiled;
  try {
    if (spec.type === 'json_schema') compiled = await compiler.compileGrammar(await compactJson(x, spec.schema));
    else if (spec.type === 'grammar') compiled = await compiler.compileGrammar(spec.ebnf);
    else compiled = await compiler.compileStructuralTag({ type: 'structural_tag', format: await compactFormat(x, spec.format) } as never);
  } catch (err) {
    // xgrammar aborts its instance on a bad input: keep its printed reason, use a new instance next time.
    if (instance === x) instance = null;
    const what = spec.type === 'json_schema' ? 'JSON schema' : spec.type === 'grammar' ? 'grammar' : 'structural format';
    throw new ConstraintError(`cannot compile the ${what}: ${reason(x.takeErrors(), err)}`);
  }
  const matcher = await x.xg.GrammarMatcher.createGrammarMatcher(compiled, o.stopIds);
  compiled.dispose();
  const V = o.vocabSize;
  const utf8 = utf8Guard(vocab, V);
  return {
    async mask(logits) {
      const bits = await matcher.getNextTokenBitmask();
      const utf8Next = utf8.allowed();
      let allowed = 0;
      for (let i = 0; i < V; i++) {
        if ((bits[i >>> 5] >>> (i & 31)) & 1 && utf8Next[i] >= 0) allowed++;
        else logits[i] = -Infinity;
      }
      if (!allowed) throw new ConstraintError('the grammar allows no token here');
    },
    accept(id) {
      if (!matcher.acceptToken(id)) throw new ConstraintError(`token ${id} does not continue the grammar`);
      utf8.accept(id);
    },
    get done() {
      return matcher.isTerminated();
    },
    dispose: () => matcher.dispose(),
  };
}

/** The "[FATAL] file.cc:123: what" line xgrammar printed, without its source location; else the thrown value. */
function reason(printed: string[], err: unknown): string {
  const fatal = printed.map((l) => /\[FATAL\][^:]*:\d+:\s*(.*)/.exec(l)?.[1]).find((m) => m);
  return fatal ?? errorText(err);
}

/** xgrammar throws Errors, strings, or (a C++ exception) a bare pointer: make a sentence of them. */
function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === 'string') return err;
  return 'xgrammar rejected it (it gives no reason for this kind of error)';
}
