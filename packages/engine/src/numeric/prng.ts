/**
 * A small seeded PRNG (mulberry32) so sampling and random test models are reproducible across runs and
 * machines. Not cryptographic; statistical quality is ample for sampling tokens and initialising weights.
 */
export class Prng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    let t = (this.#state = (this.#state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform in [-a, a). */
  symmetric(a: number): number {
    return (this.next() * 2 - 1) * a;
  }
}
