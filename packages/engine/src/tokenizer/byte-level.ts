/**
 * Builds a real-format Hugging Face `tokenizer.json` for a byte-level vocabulary: token id == byte
 * value for the 256 bytes (written with GPT-2's ByteLevel byte-to-unicode alphabet, no merges), then
 * special tokens from id 256 on. The bundled demo model and the random test models share this scheme;
 * llama.cpp reads the same vocabulary as `tokenizer.ggml.model = gpt2` with empty merges.
 */

/** GPT-2's reversible byte → printable unicode character mapping (`bytes_to_unicode`). */
export function byteToUnicode(): string[] {
  const bs: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) bs.push(b);
  for (let b = 0xa1; b <= 0xac; b++) bs.push(b);
  for (let b = 0xae; b <= 0xff; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const table: string[] = new Array(256);
  bs.forEach((b, i) => (table[b] = String.fromCodePoint(cs[i])));
  return table;
}

/** The special tokens of the byte-level scheme, in id order from 256. */
export const BYTE_LEVEL_SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const;

/** A ChatML template (the markers are special tokens 257/258). Rendered by @huggingface/jinja. */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/**
 * The `tokenizer.json` of a byte-level BPE vocabulary (GPT-2 style: ByteLevel pre-tokenizer, post
 * processor and decoder around a BPE model). `useRegex` is the pre-tokenizer's GPT-2 split regex.
 */
export function byteLevelBpeTokenizerJson(addedTokens: unknown[], vocab: Record<string, number>, merges: string[], useRegex: boolean): Record<string, unknown> {
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: useRegex },
    post_processor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: useRegex },
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: useRegex },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges,
    },
  };
}

export interface ByteLevelTokenizerOptions {
  /** Special tokens, given ids 256, 257, ... in order. @default BYTE_LEVEL_SPECIAL_TOKENS */
  specialTokens?: readonly string[];
  /** Written to tokenizer_config.json. @default CHATML_TEMPLATE (set null to omit) */
  chatTemplate?: string | null;
  /** Added tokens (among `specialTokens`) that are plain text to the tokenizer (`special: false`): decoding keeps them, as Qwen's `<tool_call>`. */
  plainTokens?: readonly string[];
  /** @default '<|endoftext|>' */
  eosToken?: string;
  /** Written as bos_token (templates print it). @default none */
  bosToken?: string;
  /** Context length recorded in tokenizer_config.json. @default 2048 */
  modelMaxLength?: number;
}

export interface ByteLevelTokenizerFiles {
  /** Contents of tokenizer.json. */
  tokenizer: Record<string, unknown>;
  /** Contents of tokenizer_config.json. */
  tokenizerConfig: Record<string, unknown>;
  /** Total vocabulary (256 + special tokens). */
  vocabSize: number;
  /** Id of each special token. */
  specialIds: Record<string, number>;
}

export function buildByteLevelTokenizer(options: ByteLevelTokenizerOptions = {}): ByteLevelTokenizerFiles {
  const specials = options.specialTokens ?? BYTE_LEVEL_SPECIAL_TOKENS;
  const eos = options.eosToken ?? '<|endoftext|>';
  const chars = byteToUnicode();
  const vocab: Record<string, number> = {};
  chars.forEach((c, b) => (vocab[c] = b));
  const specialIds: Record<string, number> = {};
  const added = specials.map((content, i) => {
    const id = 256 + i;
    vocab[content] = id;
    specialIds[content] = id;
    return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: !options.plainTokens?.includes(content) };
  });
  if (!(eos in specialIds)) throw new Error(`buildByteLevelTokenizer: eos token ${eos} is not among the special tokens`);
  if (options.bosToken !== undefined && !(options.bosToken in specialIds)) throw new Error(`buildByteLevelTokenizer: bos token ${options.bosToken} is not among the special tokens`);

  const tokenizer = byteLevelBpeTokenizerJson(added, vocab, [], false);
  const addedTokensDecoder: Record<string, unknown> = {};
  for (const a of added) addedTokensDecoder[String(a.id)] = { ...a, id: undefined };
  const tokenizerConfig: Record<string, unknown> = {
    tokenizer_class: 'PreTrainedTokenizerFast',
    add_bos_token: false,
    add_eos_token: false,
    bos_token: options.bosToken ?? null,
    eos_token: eos,
    pad_token: eos,
    unk_token: null,
    clean_up_tokenization_spaces: false,
    model_max_length: options.modelMaxLength ?? 2048,
    added_tokens_decoder: addedTokensDecoder,
  };
  const template = options.chatTemplate === undefined ? CHATML_TEMPLATE : options.chatTemplate;
  if (template !== null) tokenizerConfig.chat_template = template;
  return { tokenizer, tokenizerConfig, vocabSize: 256 + specials.length, specialIds };
}
