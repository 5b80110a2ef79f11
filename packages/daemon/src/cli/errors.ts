/**
 * An error meant for the person at the terminal: printed as one line, no stack, with an exit code.
 * Anything else that escapes a command is a bug and is printed with its message (and stack only
 * with ORCHARD_DEBUG=1).
 */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'CliError';
  }
}
