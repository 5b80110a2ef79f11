/** Helpers for reading markers out of streamed text. */

/** The earliest occurrence of any marker at or after `from`: its index and which marker, or null. */
export function findMarker(text: string, markers: readonly string[], from = 0): { at: number; marker: string } | null {
  let best: { at: number; marker: string } | null = null;
  for (const m of markers) {
    const at = text.indexOf(m, from);
    if (at >= 0 && (!best || at < best.at || (at === best.at && m.length > best.marker.length))) best = { at, marker: m };
  }
  return best;
}

/** How many trailing characters of `text` could be the start of a marker (held back until the next piece). */
export function partialMarkerTail(text: string, markers: readonly string[]): number {
  let hold = 0;
  for (const m of markers) {
    for (let k = Math.min(m.length - 1, text.length); k > hold; k--) {
      if (text.endsWith(m.slice(0, k))) {
        hold = k;
        break;
      }
    }
  }
  return hold;
}

/** Parses a call's arguments: a JSON object (or text of one) to its canonical JSON text; null if not an object. */
export function argumentsJson(v: unknown): string | null {
  let o = v;
  if (typeof v === 'string') {
    try {
      o = JSON.parse(v);
    } catch {
      return null;
    }
  }
  return o && typeof o === 'object' && !Array.isArray(o) ? JSON.stringify(o) : null;
}

/** JSON.parse that returns undefined instead of throwing. */
export function tryJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Where the JSON value at the start of `text` (after whitespace) ends: the index just past it, -1
 * while it is incomplete, -2 if the text cannot be JSON. Only brackets and strings are tracked (the
 * value is parsed properly afterwards); enough to know when a streamed value is whole.
 */
export function jsonValueEnd(text: string): number {
  let i = 0;
  while (i < text.length && /\s/.test(text[i])) i++;
  if (i === text.length) return -1;
  if (text[i] !== '{' && text[i] !== '[') return -2;
  let depth = 0;
  let inString = false;
  for (; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      if (--depth === 0) return i + 1;
    }
  }
  return -1;
}
