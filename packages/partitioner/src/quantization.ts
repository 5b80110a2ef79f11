import { InputError } from './errors.js';

/**
 * Bits per stored parameter, read from a Hugging Face config (`quantization_config`, MLX's
 * `quantization`, `torch_dtype`) or forced with `--bits`. "Effective" bits include the per-group
 * scales and biases, because those are bytes that sit in memory and are read on every token.
 */

/** What a weight is for; decides whether a quantizer touches it and how tensor parallel splits it. */
export type WeightRole =
  | 'embedding'
  | 'lm-head'
  | 'attention'
  | 'attention-kv'
  | 'attention-latent'
  | 'mlp'
  | 'routed-experts'
  | 'shared-experts'
  | 'router'
  | 'norm';

export interface WeightFormat {
  /** Human summary, e.g. "4-bit MLX (group 64) = 4.5 bits/weight". */
  label: string;
  /** Effective bits per parameter for a module (HF module name, without `.weight`) in a role. */
  bitsFor(moduleName: string, role: WeightRole): number;
}

const SOURCE = 'model config';

/** Bits of the unquantized dtype (`torch_dtype`, newer configs say `dtype`). */
export function dtypeBits(config: Record<string, unknown>): number {
  const dtype = config.torch_dtype ?? config.dtype;
  if (dtype === undefined || dtype === null) return 16;
  switch (String(dtype).replace(/^torch\./, '')) {
    case 'bfloat16':
    case 'float16':
    case 'half':
      return 16;
    case 'float32':
    case 'float':
      return 32;
    case 'float8_e4m3fn':
    case 'float8_e5m2':
      return 8;
    default:
      throw new InputError(SOURCE, config.torch_dtype !== undefined ? 'torch_dtype' : 'dtype', `is "${String(dtype)}", expected bfloat16, float16 or float32`);
  }
}

/**
 * `--bits B`: plan as if the model were converted the way MLX does it — every linear layer and the
 * embeddings quantized to B bits with a bf16 scale and bias per group of 64 (B + 0.5 bits), norms and
 * routers left at 16 bits. B >= 16 means unquantized.
 */
export function forcedBits(bits: number): WeightFormat {
  if (!Number.isFinite(bits) || bits < 1 || bits > 32) throw new InputError('request', 'bits', `must be between 1 and 32, got ${bits}`);
  const quantized = bits >= 16 ? bits : bits + 32 / 64;
  return {
    label: bits >= 16 ? `${bits}-bit (unquantized)` : `${bits}-bit, group 64 (MLX-style) = ${quantized} bits/weight`,
    bitsFor: (_name, role) => (role === 'norm' || role === 'router' ? 16 : quantized),
  };
}

/** Reads the config's own quantization, falling back to its dtype. */
export function formatFromConfig(config: Record<string, unknown>): WeightFormat {
  const base = dtypeBits(config);
  const mlx = config.quantization;
  if (isRecord(mlx) && mlx.bits !== undefined) return mlxFormat(mlx, base, 'quantization');
  const q = config.quantization_config;
  if (q === undefined || q === null) {
    return { label: `${base}-bit (${String(config.torch_dtype ?? config.dtype ?? 'bfloat16')})`, bitsFor: (_n, role) => (role === 'norm' ? Math.max(base, 16) : base) };
  }
  if (!isRecord(q)) throw new InputError(SOURCE, 'quantization_config', 'must be an object');
  if (q.bits !== undefined && q.quant_method === undefined) return mlxFormat(q, base, 'quantization_config');
  const method = String(q.quant_method ?? '');
  switch (method) {
    case 'mlx':
      return mlxFormat(q, base, 'quantization_config');
    case 'compressed-tensors':
      return compressedTensorsFormat(q, base);
    case 'fp8': {
      const block = Array.isArray(q.weight_block_size) ? (q.weight_block_size as unknown[]).map(Number) : [128, 128];
      if (block.some((b) => !(b > 0))) throw new InputError(SOURCE, 'quantization_config.weight_block_size', 'must hold positive numbers');
      // One fp32 inverse scale per block; embeddings, norms, routers and lm_head stay in bf16.
      const eff = 8 + 32 / block.reduce((a, b) => a * b, 1);
      const ignore = ignoreList(q, 'modules_to_not_convert');
      return {
        label: `fp8 blocks ${block.join('x')} = ${round(eff)} bits/weight`,
        bitsFor: (name, role) => (isLinear(role) && role !== 'lm-head' && !ignore(name) ? eff : base),
      };
    }
    case 'gptq':
    case 'awq': {
      const bits = positive(q.bits ?? q.w_bit, 'quantization_config.bits');
      const group = Number(q.group_size ?? q.q_group_size ?? 128);
      const eff = group > 0 ? bits + (16 + bits) / group : bits;
      const ignore = ignoreList(q, 'modules_to_not_convert');
      return {
        label: `${method} ${bits}-bit, group ${group} = ${round(eff)} bits/weight`,
        bitsFor: (name, role) => (isLinear(role) && role !== 'lm-head' && !ignore(name) ? eff : base),
      };
    }
    case 'bitsandbytes': {
      const eff = q.load_in_4bit ? (q.bnb_4bit_use_double_quant ? 4.127 : 4.5) : q.load_in_8bit ? 8 : base;
      return { label: `bitsandbytes = ${eff} bits/weight`, bitsFor: (_n, role) => (isLinear(role) && role !== 'lm-head' ? eff : base) };
    }
    case 'mxfp4': {
      // gpt-oss style: 4-bit values with one 8-bit shared exponent per 32; only listed modules skipped.
      const eff = 4 + 8 / 32;
      const ignore = ignoreList(q, 'modules_to_not_convert');
      return { label: `mxfp4 = ${eff} bits/weight`, bitsFor: (name, role) => (isLinear(role) && !ignore(name) ? eff : base) };
    }
    default:
      throw new InputError(SOURCE, 'quantization_config.quant_method', `"${method}" is not supported; pass --bits to plan anyway`);
  }
}

/**
 * Bits per weight of MLX affine quantization as stored (and as the engine keeps it in memory): the
 * packed bits plus one scale and one bias per group, each in the model's dtype (`scaleBits`, 16 for
 * F16/BF16 checkpoints). test/plan/quant-plan.test.ts checks the engine's row layout against it.
 */
export function mlxBitsPerWeight(bits: number, groupSize: number, scaleBits: number): number {
  return bits + (2 * scaleBits) / groupSize;
}

function mlxFormat(q: Record<string, unknown>, base: number, field: string): WeightFormat {
  const bits = positive(q.bits, `${field}.bits`);
  const group = positive(q.group_size ?? 64, `${field}.group_size`);
  const eff = mlxBitsPerWeight(bits, group, base);
  // mlx-lm's per-module entries (mixed recipes): {bits, group_size} for that module, false for none
  const own = (name: string): number | undefined => {
    const m = q[name];
    if (m === false) return base;
    if (!isRecord(m)) return undefined;
    return mlxBitsPerWeight(positive(m.bits ?? bits, `${field}.${name}.bits`), positive(m.group_size ?? group, `${field}.${name}.group_size`), base);
  };
  const overrides = Object.keys(q).filter((k) => isRecord(q[k]) || q[k] === false).length;
  return {
    label: `${bits}-bit MLX, group ${group} = ${round(eff)} bits/weight${overrides ? ` (${overrides} per-module entries)` : ''}`,
    bitsFor: (name, role) => (role === 'norm' || role === 'router' ? base : (own(name) ?? eff)),
  };
}

function compressedTensorsFormat(q: Record<string, unknown>, base: number): WeightFormat {
  const groups = q.config_groups;
  if (!isRecord(groups)) throw new InputError(SOURCE, 'quantization_config.config_groups', 'must be an object');
  const first = Object.entries(groups).sort(([a], [b]) => a.localeCompare(b))[0];
  if (!first || !isRecord(first[1]) || !isRecord(first[1].weights)) {
    throw new InputError(SOURCE, 'quantization_config.config_groups', 'needs a group with a "weights" scheme');
  }
  const w = first[1].weights as Record<string, unknown>;
  const field = `quantization_config.config_groups.${first[0]}.weights`;
  const bits = positive(w.num_bits, `${field}.num_bits`);
  const group = w.strategy === 'group' ? positive(w.group_size, `${field}.group_size`) : 0;
  // bf16 scale per group, plus a zero point when asymmetric.
  const eff = group > 0 ? bits + (16 + (w.symmetric === false ? bits : 0)) / group : bits;
  const ignore = ignoreList(q, 'ignore');
  return {
    label: `compressed-tensors ${bits}-bit${group ? `, group ${group}` : ''} = ${round(eff)} bits/weight${ignoreCount(q) ? ` (${ignoreCount(q)} ignore patterns at ${base} bits)` : ''}`,
    // Targets are Linear modules: embeddings, norms and routers stay in the base dtype.
    bitsFor: (name, role) => (isLinear(role) && role !== 'router' && !ignore(name) ? eff : base),
  };
}

function isLinear(role: WeightRole): boolean {
  return role !== 'embedding' && role !== 'norm' && role !== 'router';
}

/** compressed-tensors style: `re:<regex>` entries match from the start, plain entries match whole names. */
function ignoreList(q: Record<string, unknown>, key: string): (name: string) => boolean {
  const raw = q[key];
  if (raw === undefined || raw === null) return () => false;
  if (!Array.isArray(raw)) throw new InputError(SOURCE, `quantization_config.${key}`, 'must be a list of module names');
  const tests = raw.map((entry, i) => {
    const s = String(entry);
    if (s.startsWith('re:')) {
      let re: RegExp;
      try {
        re = new RegExp(`^(?:${s.slice(3)})`);
      } catch {
        throw new InputError(SOURCE, `quantization_config.${key}[${i}]`, `is not a valid regular expression: ${s}`);
      }
      return (name: string) => re.test(name);
    }
    return (name: string) => name === s || name.endsWith(`.${s}`);
  });
  return (name) => tests.some((t) => t(name));
}

function ignoreCount(q: Record<string, unknown>): number {
  return Array.isArray(q.ignore) ? q.ignore.length : 0;
}

function positive(v: unknown, field: string): number {
  const n = Number(v);
  if (v === undefined || v === null || !Number.isFinite(n) || n <= 0) throw new InputError(SOURCE, field, `must be a positive number, got ${JSON.stringify(v)}`);
  return n;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}
