/** `p`, or an error saying `what` did not happen within `ms` ms (the timer is cleared either way). */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout;
  return Promise.race([p, new Promise<T>((_, rej) => (t = setTimeout(() => rej(new Error(`${what} within ${ms} ms`)), ms)))]).finally(() => clearTimeout(t));
}
