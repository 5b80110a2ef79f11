/**
 * The daemon's log. On a terminal, one readable line per entry (time, level, message, key fields:
 * pino-pretty); anywhere else — or with `--log-format json` — pino's JSON lines. Either way, the
 * same entries go as JSON to a log file (`<data-dir>/logs/orchard.log` unless told otherwise), rotated
 * by size, so `orchard logs` can read the running daemon's log whether it runs in a terminal or as the
 * background service.
 */
import { mkdirSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { pino, type Logger, type StreamEntry } from 'pino';
import pretty from 'pino-pretty';
import { createStream } from 'rotating-file-stream';
import { colorsWanted } from './colors.js';

export type LogFormat = 'auto' | 'pretty' | 'json' | 'none';

/** A log file is rotated when it reaches this size… */
export const LOG_ROTATE_BYTES = 10 * 2 ** 20;
/** …and this many rotated files are kept (orchard.log.1 is the newest): 60 MB at most in all. */
export const LOG_KEEP_FILES = 5;

export interface LogOptions {
  level?: string;
  /** `auto`: pretty on a terminal, JSON otherwise; `none`: the file only (the background service). @default auto */
  format?: LogFormat;
  /** The JSON log file, or null for none. */
  file?: string | null;
  /** Where the console lines go. @default process.stdout */
  out?: NodeJS.WritableStream & { isTTY?: boolean };
  /** @default LOG_ROTATE_BYTES */
  rotateBytes?: number;
}

export function resolveLogFormat(format: LogFormat, out: { isTTY?: boolean }): 'pretty' | 'json' | 'none' {
  return format === 'auto' ? (out.isTTY ? 'pretty' : 'json') : format;
}

/** The rotating JSON file: orchard.log, then orchard.log.1 … orchard.log.5 (oldest dropped). */
export function rotatingLogFile(file: string, rotateBytes = LOG_ROTATE_BYTES): NodeJS.WritableStream {
  mkdirSync(dirname(file), { recursive: true });
  const name = basename(file);
  return createStream((index) => (index ? `${name}.${index}` : name), { path: dirname(file), size: `${Math.max(1, Math.round(rotateBytes / 1024))}K`, rotate: LOG_KEEP_FILES });
}

const PRETTY = { translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true } as const;

/** Readable lines: time, level, message, then the entry's fields on the same line. */
export function prettyStream(out: NodeJS.WritableStream & { isTTY?: boolean }): NodeJS.WritableStream {
  return pretty({ ...PRETTY, destination: out, colorize: colorsWanted(out), sync: true });
}

/** The same readable line for one JSON line of a log file (`orchard logs`); other lines stay as they are. */
export function prettyLine(colorize: boolean): (line: string) => string {
  const format = pretty.prettyFactory({ ...PRETTY, colorize });
  return (line) => {
    if (!line.startsWith('{')) return `${line}\n`;
    try {
      return format(JSON.parse(line));
    } catch {
      return `${line}\n`;
    }
  };
}

export function createLogger(levelOrOptions: string | LogOptions = 'info'): Logger {
  const o: LogOptions = typeof levelOrOptions === 'string' ? { level: levelOrOptions } : levelOrOptions;
  const level = o.level ?? 'info';
  const out = o.out ?? process.stdout;
  const format = resolveLogFormat(o.format ?? 'auto', out);
  const streams: StreamEntry[] = [];
  if (format === 'pretty') streams.push({ level: level as pino.Level, stream: prettyStream(out) });
  if (format === 'json') streams.push({ level: level as pino.Level, stream: out });
  if (o.file) streams.push({ level: level as pino.Level, stream: rotatingLogFile(o.file, o.rotateBytes) });
  return pino({ level, base: { pid: process.pid } }, pino.multistream(streams));
}
