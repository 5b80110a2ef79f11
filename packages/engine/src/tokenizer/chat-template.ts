/**
 * A model's chat template (Jinja, as Hugging Face tokenizer configs define it), rendered with
 * @huggingface/jinja, and what it can take: tool definitions, tool calls in assistant messages,
 * tool results. Messages use the Hugging Face message format (`tool_calls`, `tool_call_id`), which
 * is also OpenAI's, so a conversation from any API arrives here unchanged.
 *
 * Templates disagree on one thing their users must get right: whether a tool call's `arguments` is
 * an object (Qwen, Llama 3, Mistral, Kimi render it with `tojson`) or the JSON text itself (DeepSeek
 * concatenates it). Instead of naming families, the template is asked once: a probe conversation is
 * rendered with object arguments and the output is checked for them.
 */
import { Template } from '@huggingface/jinja';
import './jinja-compat.js';

/** A function the model may call (OpenAI's and Hugging Face's tool format). */
export interface ToolDefinition {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

/** A call the assistant made. `arguments` is JSON text (as OpenAI sends it) or the parsed object. */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string | Record<string, unknown> };
}

export interface ChatMessage {
  role: string;
  /** null for an assistant message that only calls tools. */
  content: string | null;
  /** Assistant messages: the calls it made. */
  tool_calls?: ToolCall[];
  /** Tool messages: which call this is the result of. */
  tool_call_id?: string;
  /** Tool messages: the function's name (some templates print it). */
  name?: string;
  /** Assistant messages: reasoning text, for templates that keep it apart (gpt-oss `thinking`). */
  thinking?: string;
  /**
   * Assistant messages: the reasoning before the answer, as the templates that replay it read it
   * (Qwen3, DeepSeek V3.1: `reasoning_content`; gpt-oss reads `thinking`, which it also fills).
   */
  reasoning_content?: string;
}

export interface ChatTemplateCaps {
  /** The template reads `tools`: tool definitions reach the model. */
  tools: boolean;
  /**
   * The template reads `tool_calls`: past calls (and their results) are written in the model's own
   * format. DeepSeek's templates do this without reading `tools`: the caller must describe the tools
   * (in the system message) itself.
   */
  toolCalls: boolean;
  /** Tool-call arguments must be passed as objects (false: as JSON text). */
  objectArguments: boolean;
  /**
   * An assistant message that only calls tools may have `content: null` (false: the template fails
   * on null, e.g. Qwen3 and gpt-oss concatenate it, so '' is passed; DeepSeek's need null).
   */
  nullContent: boolean;
}

export interface RenderOptions {
  /** End with the assistant header, ready for the reply. @default true */
  addGenerationPrompt?: boolean;
  /** Tool definitions; only passed when non-empty (templates test `tools is not none`). */
  tools?: ToolDefinition[];
  /** Extra template variables (transformers' `**kwargs`): enable_thinking, reasoning_effort, ... */
  variables?: Record<string, unknown>;
}

export class ChatTemplateError extends Error {
  override name = 'ChatTemplateError';
}

export class ChatTemplate {
  readonly source: string;
  readonly caps: ChatTemplateCaps;
  readonly #compiled: Template;
  readonly #specials: Record<string, string>;

  /** `specials`: bos_token, eos_token, ... as the tokenizer config names them. */
  constructor(source: string, specials: Record<string, string> = {}) {
    this.source = source;
    this.#specials = specials;
    // jinja2's lexer reads \r\n and \r as \n (newline_sequence) in text and string literals alike:
    // templates saved with CRLF (Granite 3.3, Functionary v3.2, Kimi K2) render LF prompts there.
    this.#compiled = new Template(source.replace(/\r\n?/g, '\n'));
    this.caps = { tools: /\btools\b/.test(source), toolCalls: /\btool_calls\b/.test(source), objectArguments: true, nullContent: true };
    if (this.caps.toolCalls) Object.assign(this.caps, this.#probe());
  }

  render(messages: ChatMessage[], options: RenderOptions = {}): string {
    const context = this.context(messages, options);
    try {
      return this.#compiled.render(context);
    } catch (err) {
      throw new ChatTemplateError(`the chat template failed: ${(err as Error).message}`);
    }
  }

  /** The variables the template is rendered with (plain JSON: what another Jinja engine would be given). */
  context(messages: ChatMessage[], options: RenderOptions = {}): Record<string, unknown> {
    const tools = options.tools?.length ? options.tools : undefined;
    const context: Record<string, unknown> = {
      ...this.#specials,
      ...options.variables,
      messages: messages.map((m) => this.#prepare(m)),
      add_generation_prompt: options.addGenerationPrompt ?? true,
    };
    if (tools) context.tools = tools;
    return context;
  }

  /** The message as the template expects it: no undefined keys (`'x' in message` tests), arguments in its form. */
  #prepare(m: ChatMessage): Record<string, unknown> {
    const out: Record<string, unknown> = { role: m.role, content: m.content ?? (this.caps.nullContent ? null : '') };
    if (m.tool_calls?.length) {
      out.tool_calls = m.tool_calls.map((c) => ({
        id: c.id,
        type: 'function',
        function: { name: c.function.name, arguments: this.#arguments(c.function.arguments) },
      }));
    }
    if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
    if (m.name !== undefined) out.name = m.name;
    if (m.reasoning_content !== undefined) out.reasoning_content = m.reasoning_content;
    const thinking = m.thinking ?? m.reasoning_content;
    if (thinking !== undefined) out.thinking = thinking;
    return out;
  }

  #arguments(a: string | Record<string, unknown>): string | Record<string, unknown> {
    if (!this.caps.objectArguments) return typeof a === 'string' ? a : pythonJson(a);
    if (typeof a !== 'string') return a;
    try {
      const v = JSON.parse(a);
      return v && typeof v === 'object' && !Array.isArray(v) ? v : { value: v };
    } catch {
      throw new ChatTemplateError(`a tool call's arguments are not a JSON object: ${a.slice(0, 80)}`);
    }
  }

  /**
   * Renders a probe call: with object arguments they must come out as JSON (not "[object Map]" or
   * nothing); a template that fails on `content: null` gets ''.
   */
  #probe(): Pick<ChatTemplateCaps, 'objectArguments' | 'nullContent'> {
    const render = (args: unknown, content: string | null) =>
      this.#compiled.render({
        ...this.#specials,
        add_generation_prompt: true,
        tools: [{ type: 'function', function: { name: 'probe_fn', description: 'probe', parameters: { type: 'object', properties: {} } } }],
        messages: [
          { role: 'user', content: 'probe' },
          { role: 'assistant', content, tool_calls: [{ id: 'probe0001', type: 'function', function: { name: 'probe_fn', arguments: args } }] },
          { role: 'tool', tool_call_id: 'probe0001', name: 'probe_fn', content: 'ok' },
        ],
      });
    // Shown as JSON (Qwen, Llama 3, Kimi), or key and value apart (Qwen3-Coder's <parameter=probe_arg>,
    // GLM's <arg_key>): either way an object; "[object Map]" or nothing is a template that wants text.
    const objectShown = (content: string | null) => {
      const out = render({ probe_arg: 'probe_value' }, content);
      return /"probe_arg":\s*"probe_value"/.test(out) || (/\bprobe_arg\b/.test(out) && /\bprobe_value\b/.test(out) && !/\[object |Map\(/.test(out));
    };
    const tryRender = (content: string | null) => {
      try {
        return render({ probe_arg: 'probe_value' }, content);
      } catch {
        return null;
      }
    };
    // null as OpenAI sends it, unless the template fails on it or prints it ("None", as jinja2 does: GLM).
    const withNull = tryRender(null);
    const withEmpty = tryRender('');
    const nones = (s: string) => s.split('None').length;
    const nullContent = withNull !== null && !(withEmpty !== null && nones(withNull) > nones(withEmpty));
    try {
      return { objectArguments: objectShown(nullContent ? null : ''), nullContent };
    } catch {
      // A template that rejects both gets the Hugging Face defaults.
      return { objectArguments: true, nullContent: true };
    }
  }
}

/** JSON as Python's json.dumps writes it (", " and ": "), the form templates' models were trained on. */
export function pythonJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(pythonJson).join(', ')}]`;
  if (v && typeof v === 'object') return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pythonJson(x)}`).join(', ')}}`;
  return JSON.stringify(v) ?? 'null';
}
