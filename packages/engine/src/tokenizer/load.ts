/**
 * A model directory's tokenizer: tokenizer.json (or a tiktoken.model rebuilt as one) through
 * @huggingface/tokenizers, plus
 * tokenizer_config.json's special tokens and chat template (rendered with @huggingface/jinja).
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { ModelFormatError, UnsupportedModelError } from '../errors.js';
import { ChatTemplate, type ChatMessage, type ChatTemplateCaps, type RenderOptions } from './chat-template.js';
import { vocabularyOf, type TokenVocabulary } from './vocabulary.js';
import { sentencePieceTokenizerJson, type SentencePieceVocabulary } from './sentencepiece.js';
import { parseSentencePieceModel } from './sentencepiece-model.js';
import { parseTiktokenRanks, tiktokenSpecials, tiktokenTokenizerJson, TIKTOKEN_PATTERNS } from './tiktoken.js';

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

/** The tokenizer files of a model directory, as one tokenizer.json (built for non-HF formats). */
export interface TokenizerFiles {
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  /** The file the vocabulary came from. */
  source: string;
  /** The pieces, scores and types when the source is a SentencePiece tokenizer.model. */
  sentencePiece?: SentencePieceVocabulary;
}

/** A post-processor putting `bos` before the text (Hugging Face's Llama tokenizer.json has this one). */
function bosTemplate(bos: string, id: number): Record<string, unknown> {
  const seq = (name: string) => ({ Sequence: { id: name, type_id: 0 } });
  const special = { SpecialToken: { id: bos, type_id: 0 } };
  return {
    type: 'TemplateProcessing',
    single: [special, seq('A')],
    pair: [special, seq('A'), special, seq('B')],
    special_tokens: { [bos]: { id: bos, ids: [id], tokens: [bos] } },
  };
}

/**
 * Reads `dir`'s tokenizer: tokenizer.json, else tiktoken.model (Kimi: the split pattern of the
 * tokenizer module auto_map names, special tokens from added_tokens_decoder), else a SentencePiece
 * BPE tokenizer.model, else refuses naming the files looked for.
 */
export function readTokenizerFiles(dir: string): TokenizerFiles {
  const tjPath = join(dir, 'tokenizer.json');
  const tcPath = join(dir, 'tokenizer_config.json');
  const tokenizerConfig = existsSync(tcPath) ? readJson(tcPath) : {};
  if (existsSync(tjPath)) return { tokenizerJson: readJson(tjPath), tokenizerConfig, source: tjPath };
  const tiktokenPath = join(dir, 'tiktoken.model');
  if (existsSync(tiktokenPath)) {
    // tiktoken decodes bytes as they are: no clean-up of spaces unless the config asks for it.
    const config = { clean_up_tokenization_spaces: false, ...tokenizerConfig };
    return { tokenizerJson: tiktokenDirJson(tiktokenPath, config), tokenizerConfig: config, source: tiktokenPath };
  }
  const spPath = join(dir, 'tokenizer.model');
  if (existsSync(spPath)) {
    let sentencePiece: SentencePieceVocabulary;
    try {
      sentencePiece = parseSentencePieceModel(readFileSync(spPath));
    } catch (err) {
      throw new UnsupportedModelError(`${spPath}: cannot read this SentencePiece model (${(err as Error).message})`);
    }
    // sentencepiece decodes as it is (no clean-up); LlamaTokenizer adds BOS unless told not to.
    const config: Record<string, unknown> = { clean_up_tokenization_spaces: false, ...tokenizerConfig };
    const json = sentencePieceTokenizerJson(sentencePiece);
    const bos = tokenText(config.bos_token) || '<s>';
    const bosId = sentencePiece.pieces.indexOf(bos);
    if (config.add_bos_token !== false && bosId >= 0) json.post_processor = bosTemplate(bos, bosId);
    return { tokenizerJson: json, tokenizerConfig: config, source: spPath, sentencePiece };
  }
  throw new ModelFormatError(`${dir}: no tokenizer (looked for tokenizer.json, tiktoken.model, tokenizer.model)`, tjPath);
}

/** tokenizer.json of a tiktoken directory; the pattern comes from the module tokenizer_config.json's auto_map names. */
function tiktokenDirJson(path: string, tokenizerConfig: Record<string, unknown>): Record<string, unknown> {
  const autoMap = tokenizerConfig.auto_map as { AutoTokenizer?: unknown } | undefined;
  const entry = Array.isArray(autoMap?.AutoTokenizer) ? autoMap.AutoTokenizer[0] : autoMap?.AutoTokenizer;
  const module = typeof entry === 'string' ? entry.split('.')[0] : '';
  const pattern = TIKTOKEN_PATTERNS[module];
  if (!pattern) {
    throw new UnsupportedModelError(
      `${path}: tokenizer_config.json auto_map names tokenizer module ${JSON.stringify(module || null)}, whose split pattern we do not know (known: ${Object.keys(TIKTOKEN_PATTERNS).join(', ')})`,
    );
  }
  let ranks: Uint8Array[];
  try {
    ranks = parseTiktokenRanks(readFileSync(path, 'utf8'), 'tiktoken.model');
  } catch (err) {
    throw new ModelFormatError((err as Error).message, path);
  }
  const { specials, plain } = tiktokenSpecials(ranks.length, tokenizerConfig.added_tokens_decoder);
  return tiktokenTokenizerJson({ ranks, pattern, specials, plain });
}

/** The chat template of tokenizer_config.json (a string, or the `default` of a list), else chat_template.jinja. */
export function chatTemplateOf(dir: string, tokenizerConfig: Record<string, unknown>): string | null {
  const ct = tokenizerConfig.chat_template;
  if (typeof ct === 'string') return ct;
  if (Array.isArray(ct)) {
    const t = ct.find((x) => x?.name === 'default')?.template;
    if (typeof t === 'string') return t;
  }
  const jinjaFile = join(dir, 'chat_template.jinja');
  return existsSync(jinjaFile) ? readFileSync(jinjaFile, 'utf8') : null;
}

/** A model directory's tokenizer (a model path that may be a GGUF goes through format/tokenizer.ts). */
export function loadTokenizer(dir: string): ModelTokenizer {
  const tcPath = join(dir, 'tokenizer_config.json');
  const { tokenizerJson, tokenizerConfig, source } = readTokenizerFiles(dir);
  const name = basename(source);
  let tok: Tokenizer;
  try {
    tok = new Tokenizer(tokenizerJson, tokenizerConfig);
  } catch (err) {
    throw new ModelFormatError(`${name}: cannot build the tokenizer (${(err as Error).message})`, source);
  }

  const chatTemplate = chatTemplateOf(dir, tokenizerConfig);
  const specials = {
    bos_token: tokenText(tokenizerConfig.bos_token),
    eos_token: tokenText(tokenizerConfig.eos_token),
    pad_token: tokenText(tokenizerConfig.pad_token),
    unk_token: tokenText(tokenizerConfig.unk_token),
  };
  return modelTokenizer(tok, tokenizerJson, chatTemplate, specials, { message: `tokenizer_config.json: no chat_template in ${dir}`, path: tcPath, field: 'chat_template' });
}
