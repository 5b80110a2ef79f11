/** Errors from the model store; each names the repository and file it concerns. */
export class StoreError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StoreError';
  }
}

/** The bytes on disk do not match the checksum the hub (or a peer's manifest) promised. */
export class ChecksumError extends StoreError {
  constructor(
    readonly file: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(`${file}: checksum mismatch (expected ${expected}, got ${actual}); the corrupt download was discarded`);
    this.name = 'ChecksumError';
  }
}
