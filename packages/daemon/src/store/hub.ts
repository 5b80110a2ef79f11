/**
 * The Hugging Face hub's HTTP surface that a model download needs — nothing more:
 * a repo listing with per-file sizes and checksums, and `resolve` URLs for the bytes.
 * Which hub and token are the caller's to say (`config/hub.ts` reads HF_ENDPOINT and HF_TOKEN).
 */
import { hubRefusal, networkCause, StoreError } from './errors.js';

export interface HubFile {
  /** Path inside the repo, e.g. `model-00001-of-00002.safetensors`. */
  path: string;
  size: number;
  /** SHA-256 of the content for LFS files (weights). */
  sha256?: string;
  /** Git blob id (SHA-1 of "blob <size>\0" + content) for small files stored in git. */
  gitSha1?: string;
}

export interface HubRepo {
  repo: string;
  /** The commit the listing refers to; downloads pin it so a push mid-download cannot mix revisions. */
  commit: string;
  files: HubFile[];
}

export interface HubOptions {
  /** The hub's base URL, e.g. `config/hub.ts`'s `hubSettings().endpoint`. */
  endpoint: string;
  /** Sent as a bearer token; null or absent: none. */
  token?: string | null;
  /** Per-request timeout for metadata calls. @default 30000 */
  timeoutMs?: number;
  fetch?: typeof fetch;
}

const REPO_RE = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

export function validateRepoId(repo: string): string {
  if (!REPO_RE.test(repo) || repo.includes('..')) {
    throw new StoreError(`"${repo}" is not a Hugging Face repo id (expected ORG/NAME)`);
  }
  return repo;
}

export class HubClient {
  readonly endpoint: string;
  readonly #token?: string;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(options: HubOptions) {
    this.endpoint = options.endpoint.replace(/\/+$/, '');
    this.#token = options.token ?? undefined;
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    this.#fetch = options.fetch ?? fetch;
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { 'user-agent': 'orchard', ...(this.#token ? { authorization: `Bearer ${this.#token}` } : {}), ...extra };
  }

  fileUrl(repo: string, revision: string, path: string): string {
    const enc = path.split('/').map(encodeURIComponent).join('/');
    return `${this.endpoint}/${validateRepoId(repo)}/resolve/${encodeURIComponent(revision)}/${enc}`;
  }

  /**
   * Bytes [start, end) of a file at `revision` by one range request (a safetensors header before the
   * download); the answer must be exactly those bytes.
   */
  async readRange(repo: string, revision: string, path: string, start: number, end: number, signal?: AbortSignal): Promise<Uint8Array> {
    const url = this.fileUrl(repo, revision, path);
    const res = await this.#fetch(url, {
      headers: this.headers({ range: `bytes=${start}-${end - 1}` }),
      signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(this.#timeoutMs)]) : AbortSignal.timeout(this.#timeoutMs),
    }).catch((err: Error) => {
      throw new StoreError(`${repo}: ${path}: cannot reach the hub at ${this.endpoint}: ${networkCause(err, url)}`);
    });
    if (!res.ok) throw new StoreError(hubRefusal(repo, res.status, !!this.#token, path));
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (res.status !== 206 || bytes.byteLength !== end - start) {
      throw new StoreError(`${repo}: ${path}: asked the hub for bytes ${start}-${end - 1}, got ${res.status === 206 ? `${bytes.byteLength} bytes` : `HTTP ${res.status} without a range`}`);
    }
    return bytes;
  }

  /** A small file at `revision` whole (config.json, an index): refused past `maxBytes`. */
  async readFile(repo: string, revision: string, path: string, maxBytes = 64 * 2 ** 20, signal?: AbortSignal): Promise<Uint8Array> {
    const url = this.fileUrl(repo, revision, path);
    const res = await this.#fetch(url, {
      headers: this.headers(),
      signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(this.#timeoutMs)]) : AbortSignal.timeout(this.#timeoutMs),
    }).catch((err: Error) => {
      throw new StoreError(`${repo}: ${path}: cannot reach the hub at ${this.endpoint}: ${networkCause(err, url)}`);
    });
    if (!res.ok) throw new StoreError(hubRefusal(repo, res.status, !!this.#token, path));
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (bytes.byteLength > maxBytes) throw new StoreError(`${repo}: ${path} is ${bytes.byteLength} bytes, more than the ${maxBytes} expected of it`);
    return bytes;
  }

  async listRepo(repo: string, revision = 'main', signal?: AbortSignal): Promise<HubRepo> {
    validateRepoId(repo);
    const url = `${this.endpoint}/api/models/${repo}/revision/${encodeURIComponent(revision)}?blobs=true`;
    const res = await this.#fetch(url, {
      headers: this.headers(),
      signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(this.#timeoutMs)]) : AbortSignal.timeout(this.#timeoutMs),
    }).catch((err: Error) => {
      throw new StoreError(`${repo}: cannot reach the hub at ${this.endpoint}: ${networkCause(err, url)}`);
    });
    if (res.status === 404) throw new StoreError(`${repo}: not found on ${this.endpoint} (HTTP 404): check the name (ORG/NAME; case matters) and the revision "${revision}"`);
    if (!res.ok) throw new StoreError(hubRefusal(repo, res.status, !!this.#token));
    const body = (await res.json().catch(() => undefined)) as
      | { sha?: unknown; siblings?: Array<{ rfilename?: unknown; size?: unknown; blobId?: unknown; lfs?: { sha256?: unknown; size?: unknown } }> }
      | undefined;
    if (!body || typeof body.sha !== 'string' || !Array.isArray(body.siblings)) {
      throw new StoreError(`${repo}: the hub's file listing is missing "sha" or "siblings"`);
    }
    const files: HubFile[] = body.siblings.map((s, i) => {
      if (typeof s.rfilename !== 'string') throw new StoreError(`${repo}: siblings[${i}].rfilename is missing`);
      const size = typeof s.lfs?.size === 'number' ? s.lfs.size : s.size;
      if (typeof size !== 'number') throw new StoreError(`${repo}: siblings[${i}] (${s.rfilename}) has no size`);
      return {
        path: s.rfilename,
        size,
        sha256: typeof s.lfs?.sha256 === 'string' ? s.lfs.sha256 : undefined,
        gitSha1: !s.lfs && typeof s.blobId === 'string' ? s.blobId : undefined,
      };
    });
    return { repo, commit: body.sha, files };
  }
}
