/**
 * The tensor-level pieces of HF → GGUF that the dense plan (convert.ts) and the MoE/MLA plan
 * (convert-moe.ts) share: one planned tensor, reading an HF tensor as F32, and the RoPE row permutation.
 */
import { basename } from 'node:path';
import type { ModelConfig } from '../config/config.js';
import { ModelFormatError } from '../errors.js';
import { BF16_TO_F32, F16_TO_F32 } from '../numeric/half.js';
import type { Checkpoint } from '../safetensors/checkpoint.js';

export type GgufArch = 'llama' | 'qwen2' | 'qwen3' | 'qwen3moe' | 'deepseek2' | 'gpt-oss';

/** One GGUF tensor: its row-major shape, the HF tensors it is made of, and how to compute its values. */
export interface PlannedTensor {
  gguf: string;
  shape: number[];
  from: string[];
  values: () => Float32Array;
}

/** An HF tensor copied as it is (q/k rows of `permuteHeads` heads permuted for llama.cpp's adjacent-pair RoPE). */
export function directTensor(ckpt: Checkpoint, cfg: ModelConfig, hf: string, gguf: string, permuteHeads?: number): PlannedTensor {
  const shape = ckpt.info(hf).shape;
  return {
    gguf,
    shape,
    from: [hf],
    values: () => {
      const values = readAsF32(ckpt, hf);
      return permuteHeads ? permuteRope(values, shape, permuteHeads, cfg.headDim, hf) : values;
    },
  };
}

export function readAsF32(ckpt: Checkpoint, name: string): Float32Array {
  const file = ckpt.file(name);
  const info = file.info(name);
  const n = info.shape.reduce((a, b) => a * b, 1);
  const rows = info.shape.length === 1 ? 1 : info.shape[0];
  const cols = info.shape.length === 1 ? info.shape[0] : n / rows;
  switch (info.dtype) {
    case 'F32': {
      const out = new Float32Array(n);
      file.readBlock(name, new Uint8Array(out.buffer), 0, rows, 0, cols);
      return out;
    }
    case 'F16':
    case 'BF16': {
      const bits = new Uint16Array(n);
      file.readBlock(name, new Uint8Array(bits.buffer), 0, rows, 0, cols);
      const table = info.dtype === 'F16' ? F16_TO_F32 : BF16_TO_F32;
      const out = new Float32Array(n);
      for (let i = 0; i < n; i++) out[i] = table[bits[i]];
      return out;
    }
    default:
      throw new ModelFormatError(`${basename(file.path)}: tensor ${name} has dtype ${info.dtype}; GGUF export reads F32, F16, BF16`, file.path, name);
  }
}

/**
 * HF rotate-half rows → llama.cpp adjacent-pair rows, head by head: within a head of `headDim` rows,
 * row s·headDim/2 + i moves to 2i + s. Works for weights ([rows, cols]) and biases ([rows]).
 */
export function permuteRope(values: Float32Array, shape: readonly number[], heads: number, headDim: number, name = 'tensor'): Float32Array {
  const rows = shape[0];
  const cols = shape.length === 1 ? 1 : values.length / rows;
  if (rows !== heads * headDim) throw new ModelFormatError(`${name}: ${rows} rows is not ${heads} heads × ${headDim}`, undefined, name);
  const out = new Float32Array(values.length);
  const half = headDim / 2;
  for (let h = 0; h < heads; h++) {
    for (let s = 0; s < 2; s++) {
      for (let i = 0; i < half; i++) {
        const src = (h * headDim + s * half + i) * cols;
        const dst = (h * headDim + 2 * i + s) * cols;
        out.set(values.subarray(src, src + cols), dst);
      }
    }
  }
  return out;
}
