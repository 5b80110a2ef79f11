/**
 * A generated model that never ends a text by itself: its output row for the end-of-text token is
 * zeroed, so that token's logit is 0 while the largest of the others is positive (random weights), and
 * greedy decoding runs to max_tokens. Edits model.safetensors in place (f32, untied head).
 */
import { closeSync, openSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { writeRandomModel } from '@orchard/engine/testing';

export function writeEndlessModel(dir: string, seed: number): void {
  const info = writeRandomModel(dir, { numLayers: 4, hiddenSize: 128, intermediateSize: 256, numHeads: 4, numKvHeads: 2, maxPositionEmbeddings: 2048, seed });
  const fd = openSync(join(dir, 'model.safetensors'), 'r+');
  try {
    const len = Buffer.alloc(8);
    readSync(fd, len, 0, 8, 0);
    const headerLen = Number(len.readBigUInt64LE());
    const header = Buffer.alloc(headerLen);
    readSync(fd, header, 0, headerLen, 8);
    const head = JSON.parse(header.toString('utf8'))['lm_head.weight'] as { dtype: string; shape: [number, number]; data_offsets: [number, number] };
    if (head.dtype !== 'F32') throw new Error(`lm_head.weight is ${head.dtype}, expected F32`);
    const row = head.shape[1] * 4;
    writeSync(fd, Buffer.alloc(row), 0, row, 8 + headerLen + head.data_offsets[0] + info.eosTokenId * row);
  } finally {
    closeSync(fd);
  }
}
