/**
 * A model directory's tokenizer: tokenizer.json through @huggingface/tokenizers, plus
 * tokenizer_config.json's special tokens and chat template (rendered with @huggingface/jinja).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { ModelFormatError } from '../errors.js';
import { ChatTemplate, type ChatMessage, type ChatTemplateCaps, type RenderOptions } from './chat-template.js';
import { vocabularyOf, type TokenVocabulary } from './vocabulary.js';

export type { ChatMessage };

export interface ModelTokenizer {
  /** Text → ids, with the special tokens tokenizer.json's post-processor adds (e.g. BOS). */
  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  /** Ids → text; special tokens are dropped unless `skipSpecialTokens` is false. */
  decode(ids: ArrayLike<number>, options?: { skipSpecialTokens?: boolean }): string;
  /** The chat template from tokenizer_config.json (or chat_template.jinja), if any. */
  readonly chatTemplate: string | null;
  /** What the chat template takes (tools, argument form); null without a template. */
  readonly chatTemplateCaps: ChatTemplateCaps | null;
  /**
   * Renders `messages` (and `tools`) with the chat template; throws ModelFormatError if the model has
   * none, ChatTemplateError if the template rejects the conversation (its own raise_exception).
   */
  applyChatTemplate(messages: ChatMessage[], options?: RenderOptions): string;
  /** Every id's token as text, for constrained decoding (built on first use). */
  vocabulary(): TokenVocabulary;
}

/**
 * The ModelTokenizer of a built tokenizer and its parsed tokenizer.json (also GGUF's, rebuilt as
 * one). `where` says where a missing template was looked for; `specials` are the template's
 * bos_token, eos_token, ...
 */
export function modelTokenizer(
  tok: Tokenizer,
  tokenizerJson: Record<string, unknown>,
  chatTemplate: string | null,
  specials: Record<string, string>,
  where: { message: string; path: string; field: string },
  encode?: ModelTokenizer['encode'],
): ModelTokenizer {
  let template: ChatTemplate | null = null;
  const compiled = () => {
    if (!chatTemplate) throw new ModelFormatError(where.message, where.path, where.field);
    return (template ??= new ChatTemplate(chatTemplate, specials));
  };
  let vocab: TokenVocabulary | null = null;
  return {
    encode: encode ?? ((text, options) => tok.encode(text, { add_special_tokens: options?.addSpecialTokens ?? true }).ids),
    decode: (ids, options) =>
      ids.length === 0 ? '' : tok.decode(Array.from(ids), { skip_special_tokens: options?.skipSpecialTokens ?? true }),
    chatTemplate,
    get chatTemplateCaps() {
      return chatTemplate ? compiled().caps : null;
    },
    applyChatTemplate: (messages, options) => compiled().render(messages, options),
    vocabulary: () => (vocab ??= vocabularyOf(tokenizerJson)),
  };
}

function readJson(path: string): Record<string, unknown> {
  const name = path.split('/').pop()!;
  if (!existsSync(path)) throw new ModelFormatError(`${path}: file not found`, path);
  try {
    const v = JSON.parse(readFileSync(path, 'utf8'));
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error('expected a JSON object');
    return v;
  } catch (err) {
    throw new ModelFormatError(`${name}: not valid JSON (${(err as Error).message})`, path);
  }
}

/** Content string of a special token entry (`"<s>"` or `{content: "<s>", ...}`). */
function tokenText(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string') return (v as { content: string }).content;
  return '';
}

/** A Hugging Face directory's tokenizer (a model path that may be a GGUF goes through format/tokenizer.ts). */
export function loadTokenizer(dir: string): ModelTokenizer {
  const tjPath = join(dir, 'tokenizer.json');
  const tcPath = join(dir, 'tokenizer_config.json');
  const tokenizerJson = readJson(tjPath);
  const tokenizerConfig = existsSync(tcPath) ? readJson(tcPath) : {};
  let tok: Tokenizer;
  try {
    tok = new Tokenizer(tokenizerJson, tokenizerConfig);
  } catch (err) {
    throw new ModelFormatError(`tokenizer.json: cannot build the tokenizer (${(err as Error).message})`, tjPath);
  }

  let chatTemplate: string | null = null;
  const ct = tokenizerConfig.chat_template;
  if (typeof ct === 'string') chatTemplate = ct;
  else if (Array.isArray(ct)) chatTemplate = (ct.find((t) => t?.name === 'default')?.template as string) ?? null;
  const jinjaFile = join(dir, 'chat_template.jinja');
  if (!chatTemplate && existsSync(jinjaFile)) chatTemplate = readFileSync(jinjaFile, 'utf8');
  const specials = {
    bos_token: tokenText(tokenizerConfig.bos_token),
    eos_token: tokenText(tokenizerConfig.eos_token),
    pad_token: tokenText(tokenizerConfig.pad_token),
    unk_token: tokenText(tokenizerConfig.unk_token),
  };
  return modelTokenizer(tok, tokenizerJson, chatTemplate, specials, { message: `tokenizer_config.json: no chat_template in ${dir}`, path: tcPath, field: 'chat_template' });
}
