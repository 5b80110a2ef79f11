/** pino to stdout (JSON lines); the service wrapper redirects it to a file. */
import { pino, type Logger } from 'pino';

export function createLogger(level = 'info'): Logger {
  return pino({ level, base: { pid: process.pid } });
}
