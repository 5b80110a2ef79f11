import { execFile } from 'node:child_process';
import { access, mkdir, rm, writeFile } from 'node:fs/promises';
import { homedir, userInfo } from 'node:os';
import { dirname } from 'node:path';
import type { RunResult, ServiceHost } from './manager.js';

/** The real machine: runs launchctl/systemctl with a timeout so a wedged init system cannot hang the CLI. */
export function realServiceHost(): ServiceHost {
  return {
    platform: process.platform,
    homeDir: homedir(),
    uid: process.getuid?.() ?? 0,
    user: (() => {
      try {
        return userInfo().username;
      } catch {
        return undefined;
      }
    })(),
    run(command, args) {
      return new Promise<RunResult>((resolve) => {
        execFile(command, args, { timeout: 15_000, encoding: 'utf8' }, (err, stdout, stderr) => {
          const code = err ? (typeof err.code === 'number' ? err.code : 127) : 0;
          resolve({ code, stdout: stdout ?? '', stderr: stderr || (err && code === 127 ? err.message : '') });
        });
      });
    },
    async writeFile(path, content) {
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, content, { mode: 0o644 });
    },
    async removeFile(path) {
      try {
        await access(path);
      } catch {
        return false;
      }
      await rm(path, { force: true });
      return true;
    },
    async exists(path) {
      try {
        await access(path);
        return true;
      } catch {
        return false;
      }
    },
  };
}
