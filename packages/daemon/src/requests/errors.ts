/** The two errors a request can end in before or while it runs, each with its HTTP status. */

/** A request this model cannot serve as asked: HTTP 400 with the field at fault. */
export class DialectError extends Error {
  override name = 'DialectError';
  constructor(
    message: string,
    readonly param: string | null = null,
    readonly code = 'invalid_request',
    readonly status = 400,
  ) {
    super(message);
  }
}

/** An error with an HTTP status and an OpenAI error code. */
export class ServeError extends Error {
  override name = 'ServeError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}
