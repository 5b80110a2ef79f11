import type { Command } from 'commander';
import { createReadStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { CliError } from '../errors.js';
import { defaultDataDir } from './service.js';

/** The last `lines` lines of a file, reading backwards in blocks so a large log is not loaded whole. */
export async function tailLines(file: string, lines: number): Promise<string> {
  const fh = await open(file, 'r');
  try {
    const { size } = await fh.stat();
    const block = 64 * 1024;
    let pos = size;
    let text = '';
    while (pos > 0 && text.split('\n').length <= lines + 1) {
      const len = Math.min(block, pos);
      pos -= len;
      const buf = Buffer.alloc(len);
      await fh.read(buf, 0, len, pos);
      text = buf.toString('utf8') + text;
    }
    const all = text.split('\n');
    if (all[all.length - 1] === '') all.pop();
    return all.slice(-lines).join('\n') + (all.length ? '\n' : '');
  } finally {
    await fh.close();
  }
}

export function registerLogs(program: Command): void {
  program
    .command('logs')
    .description("show the background service's log")
    .option('--data-dir <dir>', 'data directory (default ~/.orchard)')
    .option('-n, --lines <n>', 'lines to show', '100')
    .option('-f, --follow', 'keep printing new lines')
    .action(async (opts) => {
      const file = resolve(opts.dataDir ?? defaultDataDir(), 'logs', 'orchard.log');
      const n = Number(opts.lines);
      if (!Number.isInteger(n) || n < 0) throw new CliError(`--lines must be a non-negative integer, got "${opts.lines}"`, 2);
      let size: number;
      try {
        size = (await stat(file)).size;
      } catch {
        throw new CliError(`no log at ${file} (is the service installed? try \`orchard service install\`)`, 1);
      }
      process.stdout.write(await tailLines(file, n));
      if (!opts.follow) return;
      let offset = size;
      // Polling rather than fs.watch: it works the same on macOS and Linux and survives log rotation.
      await new Promise<void>(() => {
        setInterval(async () => {
          const now = await stat(file).catch(() => undefined);
          if (!now) return;
          if (now.size < offset) offset = 0;
          if (now.size > offset) {
            createReadStream(file, { start: offset, end: now.size - 1 }).pipe(process.stdout, { end: false });
            offset = now.size;
          }
        }, 500);
      });
    });
}
