/**
 * A Hugging Face directory in AutoAWQ's GEMM layout (what `model.save_quantized` writes and the hub's
 * `*-AWQ` repos hold), for tests of refusal: every decoder linear `X.weight` becomes `X.qweight` I32
 * [in, out/8] (eight 4-bit values per word), `X.qzeros` I32 [in/group, out/8] and `X.scales` F16
 * [in/group, out]; embeddings, norms and lm_head stay F16; config.json gets AutoAWQ's
 * `quantization_config`. The values are random: the engine must refuse these files, not run them.
 */
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Prng } from '../numeric/prng.js';
import { Checkpoint } from '../safetensors/checkpoint.js';
import { type TensorToWrite, writeSafetensors } from '../safetensors/writer.js';

const LINEAR = /\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\.weight$/;

/** Rewrites the model in `src` (one file or sharded) as an AWQ 4-bit checkpoint in `dst`, one `model.safetensors`. */
export function writeAwqModel(src: string, dst: string, groupSize = 32): void {
  cpSync(src, dst, { recursive: true });
  for (const f of readdirSync(dst)) if (f.endsWith('.safetensors') || f === 'model.safetensors.index.json') rmSync(join(dst, f));
  const index = join(src, 'model.safetensors.index.json');
  const ck = Checkpoint.open(src);
  const names = existsSync(index)
    ? Object.keys((JSON.parse(readFileSync(index, 'utf8')) as { weight_map: Record<string, string> }).weight_map)
    : [...ck.file('model.embed_tokens.weight').tensors.keys()];
  const rng = new Prng(7);
  const words = (n: number) => new Uint8Array(Int32Array.from({ length: n }, () => (rng.next() * 2 ** 32) | 0).buffer);
  const out: TensorToWrite[] = [];
  try {
    for (const name of names) {
      const info = ck.info(name);
      if (LINEAR.test(name)) {
        const [rows, cols] = info.shape;
        const base = name.slice(0, -'.weight'.length);
        out.push({ name: `${base}.qweight`, dtype: 'I32', shape: [cols, rows / 8], data: words((cols * rows) / 8) });
        out.push({ name: `${base}.qzeros`, dtype: 'I32', shape: [cols / groupSize, rows / 8], data: words(((cols / groupSize) * rows) / 8) });
        out.push({ name: `${base}.scales`, dtype: 'F16', shape: [cols / groupSize, rows], data: new Uint8Array(((cols / groupSize) * rows) * 2).fill(0x20) });
        continue;
      }
      const n = info.shape.reduce((a, b) => a * b, 1);
      out.push({ name, dtype: 'F16', shape: info.shape, data: new Uint8Array(n * 2).fill(0x1c) });
    }
  } finally {
    ck.close();
  }
  writeSafetensors(join(dst, 'model.safetensors'), out, { format: 'pt' });
  const config = JSON.parse(readFileSync(join(src, 'config.json'), 'utf8')) as Record<string, unknown>;
  config.torch_dtype = 'float16';
  config.quantization_config = { bits: 4, group_size: groupSize, modules_to_not_convert: null, quant_method: 'awq', version: 'gemm', zero_point: true };
  writeFileSync(join(dst, 'config.json'), JSON.stringify(config, null, 2));
}
