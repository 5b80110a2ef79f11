import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { access, constants, readdir, statfs } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CommandOutput, DoctorEnv } from './checks.js';
import { describeAdapter } from '@orchard/engine';
import { probeAdapter } from '../backend/select.js';

const BUNDLED_MODEL = fileURLToPath(new URL('../../../../models/orchard-demo/config.json', import.meta.url));

/** The real machine, every probe bounded by a timeout. */
export function realDoctorEnv(opts: { dataDir: string; apiHost: string; apiPort: number }): DoctorEnv {
  return {
    platform: process.platform,
    nodeVersion: process.version,
    ...opts,
    run: (command, args) =>
      new Promise<CommandOutput>((resolve) => {
        execFile(command, args, { timeout: 10_000, encoding: 'utf8' }, (err, stdout, stderr) => {
          const code = err ? ((err as NodeJS.ErrnoException).code === 'ENOENT' ? 127 : typeof err.code === 'number' ? err.code : 1) : 0;
          resolve({ code, stdout: stdout ?? '', stderr: stderr ?? '' });
        });
      }),
    portFree: (host, port) =>
      new Promise<boolean>((resolve) => {
        const srv = createServer();
        srv.once('error', () => resolve(false));
        srv.listen(port, host, () => srv.close(() => resolve(true)));
      }),
    orchardAnswers: async (host, port) => {
      try {
        const res = await fetch(`http://${host.includes(':') ? `[${host}]` : host}:${port}/api/cluster`, { signal: AbortSignal.timeout(2000) });
        return res.status === 200 || res.status === 401;
      } catch {
        return false;
      }
    },
    diskFreeBytes: async (path) => {
      let p = path;
      while (!existsSync(p) && p !== '/') p = join(p, '..');
      const s = await statfs(p);
      return s.bavail * s.bsize;
    },
    models: async () => {
      const root = join(opts.dataDir, 'models');
      if (!existsSync(root)) return []; // created at the first pull; doctor changes nothing
      try {
        await access(root, constants.W_OK);
        const out: string[] = [];
        for (const org of await readdir(root)) for (const name of await readdir(join(root, org)).catch(() => [])) out.push(`${org}/${name}`);
        return out;
      } catch (err) {
        return { error: `${root}: ${(err as Error).message}` };
      }
    },
    bundledModelPresent: async () => existsSync(BUNDLED_MODEL),
    gpuAdapter: async () => {
      const r = await probeAdapter();
      return { adapter: r.adapter && { name: describeAdapter(r.adapter), software: r.adapter.software }, reason: r.reason };
    },
  };
}
