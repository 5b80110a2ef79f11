/**
 * `orchard bench engine` without llama.cpp: one clear line on stderr, exit code 2, nothing on stdout
 * (no partial numbers). The oracle directory is redirected with ORCHARD_LLAMA_ORACLE_DIR.
 * `pnpm bench:engine --only moe --dtypes mlx4,fp8 --size small`: the MLX 4-bit switch_mlp and FP8 MoE
 * lines are built from models in those layouts and listed against llama.cpp (tiny model, 1 round; the
 * numbers are not checked, only that both engines produced them).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ORACLE_REQUIRED, REPO_ROOT, oracleMissingReason } from '../oracle/llama-oracle.js';

const BENCH = join(REPO_ROOT, 'packages/engine/bench/engine.ts');
const bench = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, ['--import', 'tsx', BENCH, ...args], { cwd: REPO_ROOT, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 150_000 });

describe('orchard bench engine', () => {
  it('says node-llama-cpp is missing and exits 2 without printing numbers', () => {
    const empty = mkdtempSync(join(tmpdir(), 'orchard-no-llama-'));
    try {
      const r = spawnSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'packages/daemon/src/cli/main.ts'), 'bench', 'engine', '--json'], {
        cwd: REPO_ROOT,
        env: { ...process.env, ORCHARD_LLAMA_ORACLE_DIR: empty },
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(r.status).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toContain(`node-llama-cpp is not installed in ${empty}`);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  }, 90_000);

  it('rejects a bad --threads before anything else', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'packages/daemon/src/cli/main.ts'), 'bench', 'engine', '--threads', '0'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--threads must be an integer >= 1, got "0"');
  }, 90_000);
});

describe('bench:engine MoE lines in mlx-lm 4-bit and FP8 layouts', () => {
  it('rejects an unknown --dtypes (naming mlx4 and fp8 among the formats) and an unknown --size', () => {
    const d = bench(['--dtypes', 'fp4']);
    expect(d.status).toBe(2);
    expect(d.stderr).toMatch(/--dtypes: fp4 is not one of .*mlx4, fp8/);
    const s = bench(['--size', 'huge']);
    expect(s.status).toBe(2);
    expect(s.stderr).toContain('--size takes full or small; got huge');
  }, 90_000);

  const missing = oracleMissingReason();
  const withLlama = missing && !ORACLE_REQUIRED ? it.skip : it;
  withLlama(`--only moe --dtypes mlx4,fp8,int4 --size small: decode/prefill-moe-mlx4, -fp8 and -int4 from switch_mlp, FP8 and compressed-tensors INT4 directories vs Q4_K_M / Q8_0 / Q4_0${missing ? ` (skipped: ${missing})` : ''}`, () => {
    const tmp = mkdtempSync(join(tmpdir(), 'orchard-bench-moe-quant-'));
    try {
      const r = bench(['--only', 'moe', '--dtypes', 'mlx4,fp8,int4', '--size', 'small', '--rounds', '1', '--threads', '1', '--json'], { TMPDIR: tmp });
      expect(r.status, r.stderr).toBe(0);
      const { lines } = JSON.parse(r.stdout) as { lines: { name: string; orchard: number; llamacpp: number; unit: string; ratio: number }[] };
      expect(lines.map((l) => l.name)).toEqual(['decode-moe-mlx4', 'prefill-moe-mlx4', 'decode-moe-mlx4-cpu', 'prefill-moe-mlx4-cpu', 'decode-moe-fp8', 'prefill-moe-fp8', 'decode-moe-fp8-cpu', 'prefill-moe-fp8-cpu', 'decode-moe-int4', 'prefill-moe-int4', 'decode-moe-int4-cpu', 'prefill-moe-int4-cpu']);
      for (const l of lines) {
        expect(l.orchard, l.name).toBeGreaterThan(0);
        expect(l.llamacpp, l.name).toBeGreaterThan(0);
        expect(l.ratio, l.name).toBeCloseTo(l.orchard / l.llamacpp, 2);
      }
      // Orchard ran the layouts the real converters write; llama.cpp the K-quant / Q8_0 GGUF of the same float model
      expect(r.stderr).toContain('MLX 4-bit switch_mlp (llama.cpp: Q4_K_M)');
      expect(r.stderr).toContain('FP8 blocks (llama.cpp: Q8_0)');
      expect(r.stderr).toContain('compressed-tensors INT4 experts (llama.cpp: Q4_0)');
      const root = join(tmp, 'orchard-bench-engine-moe-quant-small-v1');
      const weights = (f: string) => Object.keys(JSON.parse(readFileSync(join(root, f, 'model.safetensors.index.json'), 'utf8')).weight_map as Record<string, string>);
      expect(weights('mlx4')).toContain('model.layers.1.mlp.switch_mlp.down_proj.scales');
      expect(weights('mlx4').some((n) => n.includes('.experts.'))).toBe(false);
      expect(weights('fp8')).toContain('model.layers.1.mlp.experts.7.down_proj.weight_scale_inv');
      expect(JSON.parse(readFileSync(join(root, 'fp8/config.json'), 'utf8')).quantization_config.quant_method).toBe('fp8');
      expect(weights('int4')).toContain('model.layers.1.mlp.experts.7.down_proj.weight_packed');
      expect(JSON.parse(readFileSync(join(root, 'int4/config.json'), 'utf8')).quantization_config.format).toBe('pack-quantized');
      for (const q of ['q4_k_m', 'q8_0', 'q4_0']) expect(readFileSync(join(root, `model-${q}.gguf`)).subarray(0, 4).toString()).toBe('GGUF');
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 180_000);
});
