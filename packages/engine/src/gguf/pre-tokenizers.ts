/**
 * llama.cpp's BPE pre-tokenizers (`tokenizer.ggml.pre`), each written as the Hugging Face
 * tokenizer.json pre-tokenizer it stands for, so @huggingface/tokenizers runs the same split.
 *
 * llama.cpp (src/llama-vocab.cpp) maps a `pre` name to a list of regexes applied one after the other
 * (each splits the previous pieces further, keeping matched and unmatched parts) and to flags:
 * `ignore_merges` (a piece that is itself a token is not merged: Llama 3, Tekken) and a default
 * add_bos. The regexes below are the originals from the models' tokenizer.json files (llama.cpp
 * records them next to its adapted forms); as Split(..., Isolated) steps they split exactly as
 * llama.cpp's list does. The converter (convert.ts) goes the other way: it names the `pre` of a
 * tokenizer.json by comparing its pre-tokenizer with these lists, where llama.cpp hashes the ids of
 * a test string — both pick the entry whose split the model was trained with.
 */

type Json = Record<string, unknown>;

/** GPT-2's split (HF ByteLevel with use_regex). */
const GPT2 = String.raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`;
const LLAMA3 = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
const QWEN2 = String.raw`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
/** o200k (gpt-4o, gpt-oss, Llama 4). */
const GPT4O = String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
const TEKKEN = String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
const DEEPSEEK_V3 = [
  String.raw`\p{N}{1,3}`,
  '[一-龥぀-ゟ゠-ヿ]+',
  String.raw`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + '`' + String.raw`{|}~][A-Za-z]+|[^` + '\r\n' + String.raw`\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[` + '\r\n' + String.raw`]*|\s*[` + '\r\n' + String.raw`]+|\s+(?!\S)|\s+`,
];
/**
 * deepseek-llm's letter class is written with escapes: it holds compatibility characters (U+1FBE,
 * U+2126, U+212A, ...) that any Unicode normalization of this file would silently replace.
 */
const DEEPSEEK_LLM = [
  '[\r\n]',
  '\\s?[A-Za-z\u{B5}\u{C0}-\u{D6}\u{D8}-\u{F6}\u{F8}-\u{1BA}\u{1BC}-\u{1BF}\u{1C4}-\u{293}\u{295}-\u{2AF}\u{370}-\u{373}\u{376}\u{377}\u{37B}-\u{37D}\u{37F}\u{386}\u{388}-\u{38A}\u{38C}\u{38E}-\u{3A1}\u{3A3}-\u{3F5}\u{3F7}-\u{481}\u{48A}-\u{52F}\u{531}-\u{556}\u{10A0}-\u{10C5}\u{13A0}-\u{13F5}\u{13F8}-\u{13FD}\u{1C90}-\u{1CBA}\u{1CBD}-\u{1CBF}\u{1D00}-\u{1D2B}\u{1D6B}-\u{1D77}\u{1D79}-\u{1D9A}\u{1E00}-\u{1F15}\u{1F18}-\u{1F1D}\u{1F20}-\u{1F45}\u{1F48}-\u{1F4D}\u{1F50}-\u{1F57}\u{1F59}\u{1F5B}\u{1F5D}\u{1F5F}-\u{1F7D}\u{1F80}-\u{1FB4}\u{1FB6}-\u{1FBC}\u{1FBE}\u{1FC2}-\u{1FC4}\u{1FC6}-\u{1FCC}\u{1FD0}-\u{1FD3}\u{1FD6}-\u{1FDB}\u{1FE0}-\u{1FEC}\u{1FF2}-\u{1FF4}\u{1FF6}-\u{1FFC}\u{2102}\u{2107}\u{210A}-\u{2113}\u{2115}\u{2119}-\u{211D}\u{2124}\u{2126}\u{2128}\u{212A}-\u{212D}\u{212F}-\u{2134}\u{2139}\u{213C}-\u{213F}\u{2145}-\u{2149}\u{214E}\u{2183}\u{2184}\u{2C00}-\u{2C7B}\u{2C7E}-\u{2CE4}\u{2CEB}-\u{2CEE}\u{2CF2}\u{2CF3}\u{A640}-\u{A66D}\u{A680}-\u{A69B}\u{A722}-\u{A76F}\u{A771}-\u{A787}\u{A78B}-\u{A78E}\u{AB70}-\u{ABBF}\u{FB00}-\u{FB06}\u{FB13}-\u{FB17}\u{FF21}-\u{FF3A}\u{FF41}-\u{FF5A}\u{10400}-\u{1044F}\u{104B0}-\u{104D3}\u{104D8}-\u{104FB}\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}\u{118A0}-\u{118DF}\u{1E900}-\u{1E943}]+',
  String.raw`\s?[!-/:-~！-／：-～‘-‟　-。]+`,
  String.raw`\s+$`,
  '[一-龥ࠀ-一가-퟿]+',
  String.raw`\p{N}+`,
];
/**
 * Kimi K2's tiktoken pattern (tokenization_kimi.py `pat_str`). Its classes `[X&&[^\p{Han}]]` are
 * set intersections of the Rust regex crate; JavaScript's `u` mode has none, so each becomes
 * "(?:(?!\p{Script=Han})[X])" — one character of X that is not Han, the same set.
 */
const NOT_HAN = String.raw`(?!\p{Script=Han})`;
const KIMI_UPPER = String.raw`(?:${NOT_HAN}[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])`;
const KIMI_LOWER = String.raw`(?:${NOT_HAN}[\p{Ll}\p{Lm}\p{Lo}\p{M}])`;
export const KIMI_K2_PATTERN = [
  String.raw`\p{Script=Han}+`,
  String.raw`[^\r\n\p{L}\p{N}]?${KIMI_UPPER}*${KIMI_LOWER}+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`[^\r\n\p{L}\p{N}]?${KIMI_UPPER}+${KIMI_LOWER}*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`\p{N}{1,3}`,
  String.raw` ?[^\s\p{L}\p{N}]+[\r\n]*`,
  String.raw`\s*[\r\n]+`,
  String.raw`\s+(?!\S)`,
  String.raw`\s+`,
].join('|');
/** llama.cpp's fallback for `default` (and a missing `pre`). */
const DEFAULT = [String.raw`[\p{P}\$\+<=>\^~\|]+`, GPT2, String.raw`\p{N}+`, '[0-9][0-9][0-9]'];

export interface PreTokenization {
  /** The split regexes, applied in order (each Split(Regex, Isolated)), then bytes → GPT-2 unicode. */
  splits: readonly string[];
  /** llama.cpp's ignore_merges: a piece that is a token as a whole is that token. */
  ignoreMerges: boolean;
  /** llama.cpp's add_bos default for this pre (tokenizer.ggml.add_bos_token overrides it). */
  addBos: boolean;
  /** llama.cpp's clean_spaces: decoding drops the space before punctuation (HF clean_up_tokenization_spaces). */
  cleanSpaces: boolean;
  /** A normalizer the Hugging Face tokenizer of the family runs first (Qwen: NFC). */
  normalizer?: Json;
}

const pre = (splits: readonly string[], flags: Partial<Omit<PreTokenization, 'splits'>> = {}): PreTokenization => ({
  splits,
  ignoreMerges: flags.ignoreMerges ?? false,
  addBos: flags.addBos ?? false,
  cleanSpaces: flags.cleanSpaces ?? true,
  ...(flags.normalizer ? { normalizer: flags.normalizer } : {}),
});

const LLAMA3_PRE = pre([LLAMA3], { ignoreMerges: true, addBos: true });
const QWEN2_PRE = pre([QWEN2], { normalizer: { type: 'NFC' }, cleanSpaces: false });
const GPT2_PRE = pre([GPT2]);
const STARCODER_PRE = pre([String.raw`\p{N}`, GPT2]);
const SMOLLM_PRE = pre([String.raw`\p{N}`, GPT2], { cleanSpaces: false });
const GPT4O_PRE = pre([GPT4O], { cleanSpaces: false });

/** `tokenizer.ggml.pre` → its split, as llama.cpp's llama_vocab::impl::load maps the names. */
export const PRE_TOKENIZERS: Readonly<Record<string, PreTokenization>> = {
  default: pre(DEFAULT),
  'llama-bpe': LLAMA3_PRE,
  llama3: LLAMA3_PRE,
  'llama-v3': LLAMA3_PRE,
  falcon3: LLAMA3_PRE,
  pixtral: LLAMA3_PRE,
  'smaug-bpe': pre([LLAMA3]),
  dbrx: pre([LLAMA3]),
  qwen2: QWEN2_PRE,
  'deepseek-r1-qwen': QWEN2_PRE,
  megrez: pre([QWEN2]),
  stablelm2: pre([QWEN2]),
  'deepseek-v3': pre(DEEPSEEK_V3, { cleanSpaces: false }),
  'deepseek-llm': pre(DEEPSEEK_LLM, { cleanSpaces: false }),
  'gpt-4o': GPT4O_PRE,
  llama4: GPT4O_PRE,
  'kimi-k2': pre([KIMI_K2_PATTERN], { cleanSpaces: false }),
  smollm: SMOLLM_PRE,
  starcoder: STARCODER_PRE,
  refact: STARCODER_PRE,
  tekken: pre([TEKKEN], { ignoreMerges: true, addBos: true, cleanSpaces: false }),
  'gpt-2': GPT2_PRE,
  'phi-2': GPT2_PRE,
  mpt: GPT2_PRE,
  olmo: GPT2_PRE,
};

/** The Hugging Face pre_tokenizer JSON of a split list: Split steps, then ByteLevel without its own regex. */
export function preTokenizerJson(p: PreTokenization): Json {
  return {
    type: 'Sequence',
    pretokenizers: [
      ...p.splits.map((regex) => ({ type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false })),
      { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false },
    ],
  };
}

/**
 * The split list of a byte-level tokenizer.json pre_tokenizer, or null when it is not one (a step
 * other than Split-by-regex (Isolated), Digits or ByteLevel, or no ByteLevel at all).
 */
export function splitsOf(preTokenizer: unknown): string[] | null {
  const steps: Json[] = [];
  const walk = (p: unknown): boolean => {
    if (!p || typeof p !== 'object') return false;
    const o = p as Json;
    if (o.type === 'Sequence' && Array.isArray(o.pretokenizers)) return o.pretokenizers.every(walk);
    steps.push(o);
    return true;
  };
  if (!walk(preTokenizer)) return null;
  const splits: string[] = [];
  let byteLevel = false;
  for (const s of steps) {
    if (s.type === 'Split') {
      const regex = (s.pattern as Json | undefined)?.Regex;
      if (typeof regex !== 'string' || s.behavior !== 'Isolated' || s.invert === true) return null;
      splits.push(regex);
    } else if (s.type === 'Digits') {
      splits.push(s.individual_digits === true ? String.raw`\p{N}` : String.raw`\p{N}+`);
    } else if (s.type === 'ByteLevel') {
      if (byteLevel || s.add_prefix_space === true) return null;
      byteLevel = true;
      if (s.use_regex !== false) splits.push(GPT2);
    } else return null;
  }
  return byteLevel ? splits : null;
}

/**
 * The `tokenizer.ggml.pre` llama.cpp gives a byte-level tokenizer.json: the name whose split list is
 * the tokenizer's, told apart by ignore_merges where two share a regex (Llama 3 / Smaug). null when
 * none matches.
 */
export function preNameOf(preTokenizer: unknown, ignoreMerges: boolean): string | null {
  const splits = splitsOf(preTokenizer);
  if (!splits) return null;
  const same = (a: readonly string[]) => a.length === splits.length && a.every((r, i) => r === splits[i]);
  // Preferred names first: the ones llama.cpp's converter writes for these families.
  const order = ['llama-bpe', 'smaug-bpe', 'qwen2', 'deepseek-v3', 'deepseek-llm', 'gpt-4o', 'kimi-k2', 'smollm', 'tekken', 'gpt-2'];
  for (const name of order) {
    const p = PRE_TOKENIZERS[name];
    if (!same(p.splits)) continue;
    if ((name === 'llama-bpe' || name === 'smaug-bpe') && p.ignoreMerges !== ignoreMerges) continue;
    return name;
  }
  return null;
}
