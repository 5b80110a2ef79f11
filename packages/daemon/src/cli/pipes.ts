/**
 * `orchard ... | head` closes the pipe while the command still writes. That is the reader saying "enough",
 * not an error: stop at once, quietly, instead of dying on an unhandled EPIPE with a stack trace.
 */
export function endQuietlyOnClosedPipes(): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
  });
  // With stderr gone there is nobody to tell anything to; the command's own exit status still says it.
  process.stderr.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
}
