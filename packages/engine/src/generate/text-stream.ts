/**
 * Turns generated token ids into text pieces for streaming, and finds stop strings. Text is only
 * released when it is final: not the tail of an incomplete UTF-8 character (a byte-level token can
 * end mid-character) and not a prefix of a stop string that the next tokens might complete.
 */
export class TextStream {
  readonly #decode: (ids: number[]) => string;
  readonly #stops: string[];
  readonly #ids: number[] = [];
  #emitted = 0;
  /** The full text once a stop string was seen (without it), else null. */
  stoppedText: string | null = null;

  constructor(decode: (ids: number[]) => string, stopStrings: string[] = []) {
    this.#decode = decode;
    this.#stops = stopStrings.filter((s) => s.length > 0);
  }

  /** Adds a token; returns the newly final text (possibly ''). After a stop string, `stopped` is true. */
  push(id: number): { text: string; stopped: boolean } {
    this.#ids.push(id);
    let full = this.#decode(this.#ids);
    let stopAt = -1;
    for (const s of this.#stops) {
      const i = full.indexOf(s, Math.max(0, this.#emitted - s.length));
      if (i >= 0 && (stopAt < 0 || i < stopAt)) stopAt = i;
    }
    if (stopAt >= 0) {
      this.stoppedText = full.slice(0, stopAt);
      const text = full.slice(this.#emitted, stopAt);
      this.#emitted = stopAt;
      return { text, stopped: true };
    }
    // Hold back an incomplete character and anything that could still become a stop string.
    let end = full.length;
    while (end > this.#emitted && full.charCodeAt(end - 1) === 0xfffd) end--;
    full = full.slice(0, end);
    let hold = 0;
    for (const s of this.#stops) {
      for (let k = Math.min(s.length - 1, full.length); k > hold; k--) {
        if (full.endsWith(s.slice(0, k))) {
          hold = k;
          break;
        }
      }
    }
    end = Math.max(this.#emitted, full.length - hold);
    const text = full.slice(this.#emitted, end);
    this.#emitted = end;
    return { text, stopped: false };
  }

  /** Everything not yet released (at the end of generation). */
  flush(): string {
    if (this.stoppedText !== null) return '';
    const full = this.#decode(this.#ids);
    const text = full.slice(this.#emitted);
    this.#emitted = full.length;
    return text;
  }

  /** The whole text so far (up to a stop string). */
  get text(): string {
    return this.stoppedText ?? this.#decode(this.#ids);
  }
}
