/** One line of an engine benchmark: Orchard's figure, llama.cpp's in the same run, and their ratio. */
export interface BenchLine {
  name: string;
  /** Orchard's value (tokens/s, GB/s, ...). */
  orchard: number;
  /** llama.cpp's value in the same unit, or null where the line has no llama.cpp counterpart. */
  llamacpp: number | null;
  unit: string;
  /** orchard / llamacpp for speed lines; other lines say what their ratio is against. */
  ratio: number | null;
}

/** 4 significant digits. */
export const sig4 = (v: number) => Number(v.toPrecision(4));
