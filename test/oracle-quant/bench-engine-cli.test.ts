/**
 * `orchard bench engine` without llama.cpp: one clear line on stderr, exit code 2, nothing on stdout
 * (no partial numbers). The oracle directory is redirected with ORCHARD_LLAMA_ORACLE_DIR.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../oracle/llama-oracle.js';

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
