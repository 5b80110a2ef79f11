/**
 * `orchard logs [-n N] [-f]`: the running daemon's log, wherever it runs — in a terminal or as the
 * background service. The file is found by asking the daemon (`/api/status` names it), else in the
 * usual places; its JSON lines are shown readable on a terminal (`--json`: as they are).
 */
import type { Command } from 'commander';
import { createReadStream, existsSync } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { logDirFor } from '../../service/index.js';
import { prettyLine } from '../../logger.js';
import { getJson } from '../client.js';
import { cliSettings } from '../../config/cli.js';
import { colorsWanted } from '../../colors.js';
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

/** Where the log may be, best first: the file the running daemon names, the data dir's, the service's. */
export async function logCandidates(o: { dataDir?: string; url: string; token?: string }): Promise<{ running: string | null; candidates: string[] }> {
  let running: string | null = null;
  try {
    const status = (await getJson(o.url, '/api/status', { token: o.token, timeoutMs: 1500 })) as { self?: { logFile?: string | null } };
    running = status.self?.logFile ?? null;
  } catch {
    /* no daemon answering there: look in the usual places */
  }
  const dataDir = resolve(o.dataDir ?? defaultDataDir());
  const candidates = [running, join(dataDir, 'logs', 'orchard.log'), join(logDirFor(process.platform, homedir(), dataDir), 'orchard.log')].filter((f): f is string => !!f);
  return { running, candidates: [...new Set(candidates)] };
}

export function registerLogs(program: Command): void {
  program
    .command('logs')
    .description("show the running daemon's log (a terminal's or the background service's)")
    .option('-n, --lines <n>', 'lines to show', '100')
    .option('-f, --follow', 'keep printing new lines')
    .option('--json', 'print the JSON lines as they are')
    .option('--file <file>', 'read this log file')
    .option('--data-dir <dir>', 'data directory (default ~/.orchard)')
    .option('--url <url>', 'daemon API to ask where its log is', cliSettings().url)
    .option('--token <token>', 'API token (env ORCHARD_API_TOKEN)')
    .action(async (opts: { lines: string; follow?: boolean; json?: boolean; file?: string; dataDir?: string; url: string; token?: string }) => {
      const n = Number(opts.lines);
      if (!Number.isInteger(n) || n < 0) throw new CliError(`--lines must be a non-negative integer, got "${opts.lines}"`, 2);
      let file = opts.file ? resolve(opts.file) : undefined;
      if (!file) {
        const { running, candidates } = await logCandidates(opts);
        file = candidates.find((f) => existsSync(f));
        if (!file) {
          const why = running ? `the daemon at ${opts.url} logs to ${running}, which is not on this machine` : `no daemon answers at ${opts.url}`;
          throw new CliError(`no log at ${candidates.join(' or ')} (${why}); start one with \`orchard start\` or \`orchard service install\`, or name a file with --file`, 1);
        }
      }
      let size: number;
      try {
        size = (await stat(file)).size;
      } catch {
        throw new CliError(`no log at ${file}`, 1);
      }
      const show = opts.json ? (line: string) => `${line}\n` : prettyLine(colorsWanted(process.stdout));
      const write = (text: string) => {
        for (const line of text.split('\n')) if (line !== '') process.stdout.write(show(line));
      };
      write(await tailLines(file, n));
      if (!opts.follow) return;
      let offset = size;
      let partial = '';
      // Polling rather than fs.watch: it works the same on macOS and Linux and survives log rotation
      // (a rotated file starts again small: read it from the start).
      await new Promise<void>(() => {
        setInterval(async () => {
          const now = await stat(file!).catch(() => undefined);
          if (!now) return;
          if (now.size < offset) offset = 0;
          if (now.size > offset) {
            const chunks: Buffer[] = [];
            for await (const c of createReadStream(file!, { start: offset, end: now.size - 1 })) chunks.push(c as Buffer);
            offset = now.size;
            const text = partial + Buffer.concat(chunks).toString('utf8');
            const cut = text.lastIndexOf('\n') + 1;
            partial = text.slice(cut);
            write(text.slice(0, cut));
          }
        }, 500);
      });
    });
}
