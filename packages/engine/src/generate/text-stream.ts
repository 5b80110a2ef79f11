/**
 * Turns generated token ids into text pieces for streaming, and finds stop strings. Text is only
 * released when it is final: not the tail of an incomplete UTF-8 character (a byte-level token can
 * end mid-character) and not a prefix of a stop string that the next tokens might complete.
 *
 * The text is decoded incrementally: a push decodes only a window of the last tokens (from WINDOW
 * tokens before an anchor) and appends what the window's text gained past the anchor's, instead of
 * decoding every id again (O(n) per token, O(n^2) per stream: at a few thousand tokens more than a
 * small model's whole step). Decoders treat a token by its near neighbours (a leading space stripped
 * from the first token, "##" joins, space clean-up before punctuation, bytes joined into characters),
 * so the window's gain is the whole text's; where the window's text does not extend the anchor's as
 * it should, the push decodes everything, as before.
 */

/** Tokens of left context a window keeps before its anchor. */
const WINDOW = 8;
export class TextStream {
  readonly #decode: (ids: number[]) => string;
  readonly #stops: string[];
  readonly #ids: number[] = [];
  #emitted = 0;
  /** The whole text of #ids (what decode(#ids) gives). */
  #full = '';
  /** Tokens before the anchor, where the window starts, and the window's text up to the anchor. */
  #anchor = 0;
  #from = 0;
  #anchorText = '';
  /** The full text up to the anchor. */
  #anchorFull = '';
  /** The full text once a stop string was seen (without it), else null. */
  stoppedText: string | null = null;

  constructor(decode: (ids: number[]) => string, stopStrings: string[] = []) {
    this.#decode = decode;
    this.#stops = stopStrings.filter((s) => s.length > 0);
  }

  /** decode(#ids), from the window when its text extends the anchor's; the anchor moves up to a complete character. */
  #extend(): string {
    const ids = this.#ids;
    const tail = this.#decode(ids.slice(this.#from));
    let full: string;
    if (tail.startsWith(this.#anchorText)) full = this.#anchorFull + tail.slice(this.#anchorText.length);
    else full = this.#decode(ids);
    // A text ending in an incomplete character may still change: the anchor waits for it to complete.
    if (ids.length - this.#anchor >= WINDOW && full.charCodeAt(full.length - 1) !== 0xfffd) {
      this.#anchor = ids.length;
      this.#from = Math.max(0, ids.length - WINDOW);
      this.#anchorText = this.#decode(ids.slice(this.#from));
      this.#anchorFull = full;
    }
    return full;
  }

  /** Adds a token; returns the newly final text (possibly ''). After a stop string, `stopped` is true. */
  push(id: number): { text: string; stopped: boolean } {
    this.#ids.push(id);
    let full = (this.#full = this.#extend());
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
    const full = this.#full;
    const text = full.slice(this.#emitted);
    this.#emitted = full.length;
    return text;
  }

  /** The whole text so far (up to a stop string). */
  get text(): string {
    return this.stoppedText ?? this.#full;
  }
}
