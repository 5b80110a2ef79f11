/**
 * Errors for bad model files. Every message names the file (and the tensor or field when there is
 * one) so the CLI can print it as one line and the user knows exactly what to fix.
 */
export class ModelFormatError extends Error {
  constructor(
    message: string,
    /** The file at fault. */
    readonly file?: string,
    /** The tensor or config field at fault, when there is one. */
    readonly item?: string,
  ) {
    super(message);
    this.name = 'ModelFormatError';
  }
}

/** A valid model that this engine cannot run (architecture, option or split it does not support). */
export class UnsupportedModelError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsupportedModelError';
  }
}
