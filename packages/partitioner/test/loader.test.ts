import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadModel } from '../src/loader.js';
import { denseConfig } from './helpers.js';

/** Writes a safetensors file whose tensors have the given byte sizes (contents zero). */
export function writeSafetensors(file: string, tensors: Record<string, number>): void {
  let offset = 0;
  const header: Record<string, unknown> = { __metadata__: { format: 'pt' } };
  for (const [name, bytes] of Object.entries(tensors)) {
    header[name] = { dtype: 'U8', shape: [bytes], data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  const json = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(file, Buffer.concat([len, json, Buffer.alloc(offset)]));
}

describe('loader: config.json and safetensors headers', () => {
  const dir = mkdtempSync(join(tmpdir(), 'orchard-loader-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const config = denseConfig({ num_hidden_layers: 2, hidden_size: 64, intermediate_size: 128, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 100 });
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  const layer = (i: number) => ({
    [`model.layers.${i}.self_attn.q_proj.weight`]: 300,
    [`model.layers.${i}.self_attn.v_proj.weight`]: 50,
    [`model.layers.${i}.mlp.up_proj.weight`]: 600,
    [`model.layers.${i}.post_attention_layernorm.weight`]: 20,
  });
  writeSafetensors(join(dir, 'model-00001-of-00002.safetensors'), { 'model.embed_tokens.weight': 500, ...layer(0) });
  writeSafetensors(join(dir, 'model-00002-of-00002.safetensors'), { ...layer(1), 'lm_head.weight': 500, 'model.norm.weight': 8 });

  it('sums exact tensor bytes across shards', async () => {
    const m = await loadModel(dir);
    expect(m.bytesFrom).toBe('safetensors');
    expect(m.layers.map((l) => l.bytes)).toEqual([970, 970]);
    expect(m.totalBytes).toBe(500 + 2 * 970 + 508);
    expect(m.name).toBe(dir.split('/').pop());
  });

  it('--bits overrides the files and estimates from the config', async () => {
    const m = await loadModel(join(dir, 'config.json'), { bits: 4 });
    expect(m.bytesFrom).toBe('config');
    expect(m.format).toMatch(/4-bit/);
  });

  it('names the file for missing paths, bad JSON and broken headers', async () => {
    await expect(loadModel(join(dir, 'nope'))).rejects.toThrow(/nope does not exist/);
    const badDir = mkdtempSync(join(dir, 'bad-'));
    writeFileSync(join(badDir, 'config.json'), '{ not json');
    await expect(loadModel(badDir)).rejects.toThrow(/config.json is not valid JSON/);
    writeFileSync(join(badDir, 'config.json'), JSON.stringify(config));
    writeFileSync(join(badDir, 'model.safetensors'), Buffer.from([1, 2, 3]));
    await expect(loadModel(badDir)).rejects.toThrow(/model.safetensors.*shorter than 8 bytes/);
  });
});
