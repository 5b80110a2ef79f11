/**
 * A runner process: one rank of one instance (runner.ts), driven over the IPC channel of the daemon
 * that spawned it. Runs outside the daemon so a long prefill never stalls the daemon's event loop, and
 * exits when the daemon goes away (IPC disconnect), closing its sockets so the peers notice at once.
 */
import type { ToRunner } from './protocol.js';
import { Runner } from './runner.js';

const runner = new Runner({
  send: (m) => process.send?.(m),
  exit: (code) => process.exit(code),
  log: (line) => process.stderr.write(`orchard runner: ${line}\n`),
});
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => runner.handle(m as ToRunner));
