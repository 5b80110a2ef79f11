import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Tokenizer } from '@huggingface/tokenizers';
import { writeRandomModel } from '../src/testing/index.js';

const root = mkdtempSync(join(tmpdir(), 'orchard-random-model-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function header(file: string): Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }> {
  const buf = readFileSync(file);
  const len = Number(buf.readBigUInt64LE(0));
  return JSON.parse(buf.subarray(8, 8 + len).toString('utf8'));
}

describe('writeRandomModel', () => {
  it('writes a Hugging Face layout with HF tensor names', () => {
    const info = writeRandomModel(join(root, 'a'), { variant: 'qwen2', dtype: 'f16' });
    const files = readdirSync(info.dir).sort();
    expect(files).toEqual(['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']);
    const h = header(join(info.dir, 'model.safetensors'));
    expect(h['model.layers.0.self_attn.q_proj.bias'].shape).toEqual([64]);
    expect(h['model.layers.3.mlp.down_proj.weight']).toMatchObject({ dtype: 'F16', shape: [64, 128] });
    expect(h['lm_head.weight'].shape).toEqual([264, 64]);
    const config = JSON.parse(readFileSync(join(info.dir, 'config.json'), 'utf8'));
    expect(config.architectures).toEqual(['Qwen2ForCausalLM']);
    const tc = JSON.parse(readFileSync(join(info.dir, 'tokenizer_config.json'), 'utf8'));
    expect(typeof tc.chat_template).toBe('string');
  });

  it('is deterministic for a seed and differs across seeds', () => {
    writeRandomModel(join(root, 's1'), { seed: 7 });
    writeRandomModel(join(root, 's2'), { seed: 7 });
    writeRandomModel(join(root, 's3'), { seed: 8 });
    const a = readFileSync(join(root, 's1', 'model.safetensors'));
    expect(a.equals(readFileSync(join(root, 's2', 'model.safetensors')))).toBe(true);
    expect(a.equals(readFileSync(join(root, 's3', 'model.safetensors')))).toBe(false);
  });

  it('writes sharded checkpoints with an index covering every tensor', () => {
    const info = writeRandomModel(join(root, 'sharded'), { shards: 3, tiedEmbeddings: true, variant: 'qwen3' });
    const index = JSON.parse(readFileSync(join(info.dir, 'model.safetensors.index.json'), 'utf8'));
    expect(Object.keys(index.weight_map).sort()).toEqual([...info.tensorNames].sort());
    expect(index.weight_map['lm_head.weight']).toBeUndefined();
    const files = new Set(Object.values(index.weight_map));
    expect(files).toEqual(new Set(['model-00001-of-00003.safetensors', 'model-00002-of-00003.safetensors', 'model-00003-of-00003.safetensors']));
    for (const f of files) {
      const h = header(join(info.dir, f as string));
      for (const name of Object.keys(h)) if (name !== '__metadata__') expect(index.weight_map[name]).toBe(f);
    }
    expect(header(join(info.dir, index.weight_map['model.layers.0.self_attn.q_norm.weight']))['model.layers.0.self_attn.q_norm.weight'].shape).toEqual([32]);
  });

  it('writes a byte-level tokenizer.json that @huggingface/tokenizers loads (id == byte)', () => {
    const info = writeRandomModel(join(root, 'tok'));
    const tj = JSON.parse(readFileSync(join(info.dir, 'tokenizer.json'), 'utf8'));
    const tc = JSON.parse(readFileSync(join(info.dir, 'tokenizer_config.json'), 'utf8'));
    const tok = new Tokenizer(tj, tc);
    const text = 'Orchard: pommes, café, 🍎!\n';
    const ids = tok.encode(text).ids;
    expect(ids).toEqual([...Buffer.from(text, 'utf8')]);
    expect(tok.decode(ids)).toBe(text);
    expect(tok.encode('a<|endoftext|>').ids).toEqual([97, info.eosTokenId]);
  });
});
