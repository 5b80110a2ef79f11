/**
 * A model directory's tokenizer: tokenizer.json through @huggingface/tokenizers, plus
 * tokenizer_config.json's special tokens and chat template (rendered with @huggingface/jinja).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { ModelFormatError } from '../errors.js';
import { isGgufPath } from '../gguf/read.js';
import { loadGgufTokenizer } from '../gguf/read-tokenizer.js';

export interface ChatMessage {
  role: string;
  content: string;
}

export interface ModelTokenizer {
  /** Text → ids, with the special tokens tokenizer.json's post-processor adds (e.g. BOS). */
  encode(text: string, options?: { addSpecialTokens?: boolean }): number[];
  /** Ids → text; special tokens are dropped unless `skipSpecialTokens` is false. */
  decode(ids: ArrayLike<number>, options?: { skipSpecialTokens?: boolean }): string;
  /** The chat template from tokenizer_config.json (or chat_template.jinja), if any. */
  readonly chatTemplate: string | null;
  /** Renders `messages` with the chat template; throws if the model has none. */
  applyChatTemplate(messages: ChatMessage[], options?: { addGenerationPrompt?: boolean }): string;
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

export function loadTokenizer(dir: string): ModelTokenizer {
  if (isGgufPath(dir)) return loadGgufTokenizer(dir);
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
  let compiled: Template | null = null;

  return {
    encode: (text, options) => tok.encode(text, { add_special_tokens: options?.addSpecialTokens ?? true }).ids,
    decode: (ids, options) =>
      ids.length === 0 ? '' : tok.decode(Array.from(ids), { skip_special_tokens: options?.skipSpecialTokens ?? true }),
    chatTemplate,
    applyChatTemplate(messages, options) {
      if (!chatTemplate) throw new ModelFormatError(`tokenizer_config.json: no chat_template in ${dir}`, tcPath, 'chat_template');
      compiled ??= new Template(chatTemplate);
      return compiled.render({
        messages,
        add_generation_prompt: options?.addGenerationPrompt ?? true,
        bos_token: tokenText(tokenizerConfig.bos_token),
        eos_token: tokenText(tokenizerConfig.eos_token),
        pad_token: tokenText(tokenizerConfig.pad_token),
        unk_token: tokenText(tokenizerConfig.unk_token),
      });
    },
  };
}
