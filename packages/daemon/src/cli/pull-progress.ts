/**
 * What `orchard pull` shows while it downloads: per file and overall, bytes done of the total, speed
 * and time left. Pure (the clock is passed in), so the line can be tested exactly; the command writes
 * it over itself on a terminal, and as occasional plain lines elsewhere.
 */

export interface FileProgress {
  file: string;
  done: number;
  total: number;
  source?: string;
}

/** Bytes for people: 512 B, 3.4 MB, 1.20 GB. */
export function formatBytes(n: number): string {
  if (n < 1000) return `${n} B`;
  const units = ['kB', 'MB', 'GB', 'TB'];
  let v = n / 1000;
  let u = 0;
  while (v >= 1000 && u < units.length - 1) {
    v /= 1000;
    u++;
  }
  return `${v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)} ${units[u]}`;
}

/** Time left for people: 42s, 3m05s, 1h02m; "?" before anything moved. */
export function formatDuration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return '?';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** Speed over the last few seconds (a sliding window of samples), so a stall shows quickly. */
class Rate {
  readonly #samples: { t: number; bytes: number }[] = [];
  constructor(readonly windowMs = 5000) {}
  add(t: number, bytes: number): void {
    this.#samples.push({ t, bytes });
    while (this.#samples.length > 2 && t - this.#samples[1].t > this.windowMs) this.#samples.shift();
  }
  /** Bytes per second, or null before two samples a moment apart. */
  get perSecond(): number | null {
    const s = this.#samples;
    if (s.length < 2) return null;
    const dt = s[s.length - 1].t - s[0].t;
    return dt >= 200 ? ((s[s.length - 1].bytes - s[0].bytes) * 1000) / dt : null;
  }
}

export class PullProgress {
  readonly #now: () => number;
  readonly #files = new Map<string, FileProgress>();
  readonly #fileRate = new Map<string, Rate>();
  readonly #rate = new Rate();
  #current: string | null = null;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Every file the pull will look at, with its size (for the overall total). */
  plan(files: { file: string; size: number }[]): void {
    for (const f of files) if (!this.#files.has(f.file)) this.#files.set(f.file, { file: f.file, done: 0, total: f.size });
  }

  update(e: FileProgress): void {
    const t = this.#now();
    this.#files.set(e.file, { ...e });
    if (!this.#fileRate.has(e.file)) this.#fileRate.set(e.file, new Rate());
    this.#fileRate.get(e.file)!.add(t, e.done);
    this.#rate.add(t, this.done);
    this.#current = e.file;
  }

  get done(): number {
    return [...this.#files.values()].reduce((s, f) => s + Math.min(f.done, f.total), 0);
  }

  get total(): number {
    return [...this.#files.values()].reduce((s, f) => s + f.total, 0);
  }

  /** `model.safetensors  1.20 MB / 3.40 MB  35%  512 kB/s  ETA 4s  ·  all 1.30 MB / 3.50 MB  37%  ETA 4s` */
  line(): string {
    const parts: string[] = [];
    const f = this.#current ? this.#files.get(this.#current) : undefined;
    if (f) {
      const speed = this.#fileRate.get(f.file)?.perSecond ?? null;
      const left = speed && speed > 0 ? (f.total - f.done) / speed : null;
      parts.push(`${f.file}${f.source && f.source !== 'hub' ? ` (${f.source})` : ''}  ${amount(f.done, f.total)}  ${speed === null ? '–' : `${formatBytes(Math.round(speed))}/s`}  ETA ${f.done >= f.total ? '0s' : formatDuration(left)}`);
    }
    if (this.#files.size > 1 || !f) {
      const speed = this.#rate.perSecond;
      const left = speed && speed > 0 ? (this.total - this.done) / speed : null;
      parts.push(`all ${amount(this.done, this.total)}  ETA ${this.done >= this.total ? '0s' : formatDuration(left)}`);
    }
    return parts.join('  ·  ');
  }
}

function amount(done: number, total: number): string {
  const pct = total > 0 ? Math.floor((100 * done) / total) : 100;
  return `${formatBytes(done)} / ${formatBytes(total)}  ${pct}%`;
}
