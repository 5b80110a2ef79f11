/**
 * The model store (`<data-dir>/models/ORG/NAME/`): each model is a plain Hugging Face directory the
 * engine loads as is, plus `.orchard-manifest.json` recording the pinned commit and, per file, its
 * checksum and whether it is whole or only some tensors; each file's verified chunks are logged in
 * `.orchard-chunks/` (chunked/chunk-file.ts), which is what peers are served from.
 *
 * A pull takes each chunk from the cheapest place that has it: already on disk, peers in the pod
 * (striped over every link, pod/fetch-file.ts), or the hub — once per pod — and for a pipeline stage
 * only the chunks holding its tensors.
 */
import { existsSync, readdirSync, rmdirSync } from 'node:fs';
import { access, constants, mkdir, open, readFile, rm, stat, statfs as fsStatfs, writeFile, readdir } from 'node:fs/promises';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describeModelFiles } from '@orchard/engine';
import { contentKey, type ChunkedFileInfo } from './chunked/chunk-file.js';
import { ChunkRegistry } from './chunked/registry.js';
import { diskError, DiskSpaceError, formatSize, ModelRefusedError, StoreError } from './errors.js';
import { pickGguf } from './gguf-pick.js';
import { HubClient, validateRepoId, type HubFile, type HubRepo } from './hub.js';
import { HUB, type LinkStat, type PeerHandle, type PodRoute } from './pod/fetch-file.js';
import { hubSource } from './pod/hub-source.js';
import { pullFile } from './pod/pull-file.js';
import { ggufStageTensorFilter, stageTensorFilter, type TensorSelection } from './safetensors-range.js';
import { checkModelFiles, readHubHeader } from './check-before-pull.js';
import { chunksCovering } from './chunked/layout.js';
import { headerEnd } from './chunked/safetensors-layout.js';

export const MANIFEST_FILE = '.orchard-manifest.json';

export interface StoredFile {
  size: number;
  sha256?: string;
  gitSha1?: string;
  /** Whole file on disk and verified, or only the tensors listed. */
  complete: boolean;
  tensors?: string[];
}

export interface ModelManifest {
  repo: string;
  commit: string;
  files: Record<string, StoredFile>;
  /**
   * Files a pull set out to fetch and has not finished, written before its first byte: while any is
   * left the model is incomplete (not listed, not placed) and a daemon that starts resumes the pull.
   */
  pending?: string[];
  /** How the unfinished pull was asked for, so it resumes the same way. */
  resume?: { quant?: string; fromPod?: boolean; revision?: string };
}

/** Free space of the file system holding a path (`fs.statfs`'s fields; injectable for tests). */
export type StatFs = (path: string) => Promise<{ bavail: number | bigint; bsize: number | bigint }>;

export interface StoreOptions {
  /** @default fs.promises.statfs */
  statfs?: StatFs;
}

/** Where a file's new bytes came from: none (local), peers, the hub (whole or a stage's range), or both. */
export type FileSourceKind = 'local' | 'peer' | 'hub' | 'hub-range' | 'peer+hub';

export interface PullEvent {
  file: string;
  source: FileSourceKind;
  done: number;
  total: number;
  /** Bytes of this file received so far by source ("hub" or a peer id). */
  bySource?: Record<string, number>;
  /** The links in use and their measured rates. */
  links?: LinkStat[];
}

/** The pod as the store sees it (implemented over libp2p in peers/pod-access.ts). */
export interface PodAccess {
  /** Peers that have, or are fetching, some of the file with `key`. */
  holders(key: string, signal?: AbortSignal): Promise<PeerHandle[]>;
  /** The hub ledger and named peers, for one file. */
  route(key: string, size: number, signal?: AbortSignal): PodRoute;
  /** A peer's listing of `repo` at the commit it holds (when the hub is not to be asked). */
  listing(repo: string, signal?: AbortSignal): Promise<HubRepo | undefined>;
}

export interface PullOptions {
  revision?: string;
  /** Only these tensors of the safetensors files (a pipeline stage); everything else whole. */
  selection?: TensorSelection;
  pod?: PodAccess;
  /** Peers only: neither the listing nor any byte from the hub. */
  fromPod?: boolean;
  signal?: AbortSignal;
  onProgress?: (e: PullEvent) => void;
  /** A peer served bytes that did not match the pod's digest (it was dropped for this pull). */
  onBadPeer?: (peer: string, file: string, chunk: number, why: string) => void;
  /** The pod's hub ledger could not be asked: chunks went to the hub without a claim. */
  onLedgerUnreachable?: (err: Error) => void;
  /** GGUF repos: the quantisation to pull (`org/name:Q4_K_M`). */
  quant?: string;
  /** GGUF repos without a named quantisation: the largest loadable file under this many bytes. @default 75% of RAM */
  budgetBytes?: number;
  /** Told once, before any byte moves, which files the pull covers and their sizes (for an overall total). */
  onPlan?: (files: { file: string; size: number }[]) => void;
}

export interface PullResult {
  dir: string;
  commit: string;
  /** Where each file came from. */
  sources: Record<string, FileSourceKind>;
  /** Bytes fetched from the hub by this pull. */
  hubBytes: number;
  /** Bytes fetched from peers by this pull. */
  peerBytes: number;
  /** Bytes by source: "hub" or a peer id. */
  bySource: Record<string, number>;
  /** Peers dropped for serving bad bytes. */
  badPeers: string[];
}

/** Files a text-generation model needs; READMEs, images and other formats are skipped. */
function wanted(file: HubFile): boolean {
  const p = file.path;
  if (p.includes('/')) return false;
  return (
    p.endsWith('.safetensors') ||
    p === 'model.safetensors.index.json' ||
    p === 'config.json' ||
    p === 'generation_config.json' ||
    p.startsWith('tokenizer') ||
    // Kimi K2's vocabulary (no tokenizer.json); its split pattern is known by the tokenizer module's name, never run
    p === 'tiktoken.model' ||
    p === 'special_tokens_map.json' ||
    p === 'chat_template.jinja' ||
    p === 'chat_template.json'
  );
}

/**
 * A Hugging Face model directory (config.json + safetensors + tokenizer), or — for a GGUF repo, or when
 * a quantisation is named — the GGUF model chosen by pickGguf (one file, or a split set's parts).
 */
function chooseFiles(repo: string, all: HubFile[], o: PullOptions): HubFile[] {
  const hf = all.filter(wanted);
  const isHf = hf.some((f) => f.path === 'config.json') && hf.some((f) => f.path.endsWith('.safetensors'));
  if (isHf && !o.quant) return hf;
  if (hf.some((f) => f.path === 'config.json') && !all.some((f) => f.path.endsWith('.gguf'))) {
    throw new StoreError(`${repo}: the repo has no .safetensors weights and no .gguf file (other formats are not supported)`);
  }
  return pickGguf(repo, all, { quant: o.quant, budgetBytes: o.budgetBytes ?? Math.floor(os.totalmem() * 0.75) });
}

/** A complete local file's safetensors header (its JSON), or undefined when the file is not there whole. */
async function localHeader(path: string, size: number): Promise<Uint8Array | undefined> {
  const fh = await open(path, 'r').catch(() => undefined);
  if (!fh) return undefined;
  try {
    if ((await fh.stat()).size !== size) return undefined;
    const first = Buffer.alloc(8);
    await fh.read(first, 0, 8, 0);
    const end = headerEnd(first, size, path);
    const header = Buffer.alloc(end - 8);
    const { bytesRead } = await fh.read(header, 0, end - 8, 8);
    return bytesRead === end - 8 ? new Uint8Array(header) : undefined;
  } finally {
    await fh.close();
  }
}

export class ModelStore {
  readonly root: string;
  readonly hub: HubClient;
  /** Open chunked files by content key: shared by pulls and the weights server. */
  readonly chunks: ChunkRegistry;

  readonly #statfs: StatFs;

  constructor(dataDir: string, hub: HubClient, o: StoreOptions = {}) {
    this.root = resolve(dataDir, 'models');
    this.hub = hub;
    this.#statfs = o.statfs ?? ((path) => fsStatfs(path));
    this.chunks = new ChunkRegistry((key) => this.#locate(key));
  }

  dirFor(repo: string): string {
    return join(this.root, ...validateRepoId(repo).split('/'));
  }

  async readManifest(repo: string): Promise<ModelManifest | undefined> {
    try {
      return JSON.parse(await readFile(join(this.dirFor(repo), MANIFEST_FILE), 'utf8')) as ModelManifest;
    } catch {
      return undefined;
    }
  }

  async #writeManifest(m: ModelManifest): Promise<void> {
    const path = join(this.dirFor(m.repo), MANIFEST_FILE);
    await writeFile(path, `${JSON.stringify(m, null, 2)}\n`).catch((err: unknown) => Promise.reject(diskError(err, path) ?? err));
  }

  /** Repos whose last whole-model pull did not finish (a crash, a kill, a full disk), with how it was asked for. */
  async interrupted(): Promise<ModelManifest[]> {
    return (await this.list()).filter((m) => m.pending?.length && m.resume);
  }

  /**
   * The store's directory can be written: checked on the nearest directory that exists, so a
   * read-only data directory is named as such rather than as a failed mkdir further down.
   */
  async #assertWritable(dir: string): Promise<void> {
    let at = dir;
    while (!(await stat(at).catch(() => undefined))) {
      const up = dirname(at);
      if (up === at) break;
      at = up;
    }
    await access(at, constants.W_OK).catch((err: unknown) => Promise.reject(diskError(err, at) ?? err));
    await mkdir(dir, { recursive: true }).catch((err: unknown) => Promise.reject(diskError(err, dir, 'creating') ?? err));
  }

  /**
   * Refuses a pull the disk cannot hold, before a byte is fetched: the bytes still to come (a file's
   * size less the blocks it already has, for a resumed pull) against the free space where they go.
   */
  async #assertSpace(repo: string, dir: string, files: HubFile[]): Promise<void> {
    let needed = 0;
    for (const f of files) {
      const st = await stat(join(dir, f.path)).catch(() => undefined);
      needed += Math.max(0, f.size - (st ? st.blocks * 512 : 0));
    }
    const fs = await this.#statfs(dir).catch(() => undefined);
    if (!fs) return;
    const free = Number(fs.bavail) * Number(fs.bsize);
    if (needed > free) {
      throw new DiskSpaceError(
        `${repo}: not enough free space in ${dir}: the pull needs ${formatSize(needed)} more and the disk has ${formatSize(free)} free; free ${formatSize(needed - free)} there, or start orchard with --data-dir on a larger disk (or set ORCHARD_DATA_DIR)`,
        dir,
        needed,
        free,
      );
    }
  }

  /** Models present in the store (complete or partial). */
  async list(): Promise<ModelManifest[]> {
    const out: ModelManifest[] = [];
    for (const org of await readdir(this.root).catch(() => [] as string[])) {
      for (const name of await readdir(join(this.root, org)).catch(() => [] as string[])) {
        const m = await this.readManifest(`${org}/${name}`).catch(() => undefined);
        if (m) out.push(m);
      }
    }
    return out;
  }

  /** Where the file with content `key` lies in this store, if anywhere (for the weights server). */
  async #locate(key: string): Promise<{ path: string; info: ChunkedFileInfo } | undefined> {
    for (const m of await this.list()) {
      for (const [path, f] of Object.entries(m.files)) {
        if (contentKey(f) === key) return { path: join(this.dirFor(m.repo), path), info: { key, size: f.size, sha256: f.sha256, gitSha1: f.gitSha1, label: `${m.repo}: ${path}` } };
      }
    }
    return undefined;
  }

  /** Whole-model pulls under way, by repo: a second caller (a resume at start, a request) joins the first. */
  readonly #wholePulls = new Map<string, Promise<PullResult>>();

  pull(repo: string, options: PullOptions = {}): Promise<PullResult> {
    // Two writers of one model's manifest would each keep their own view of it: the later write wins
    // and can record a finished file as unfinished. A whole-model pull is therefore done once at a time.
    // (A joiner hears no progress of its own and cannot abort the first: the pull is the same bytes.)
    if (options.selection) return this.#pullOnce(repo, options);
    const key = `${repo}\u0000${options.quant ?? ''}\u0000${options.revision ?? ''}\u0000${options.fromPod ? 'pod' : ''}`;
    const running = this.#wholePulls.get(key);
    if (running) return running;
    const p = this.#pullOnce(repo, options).finally(() => this.#wholePulls.delete(key));
    this.#wholePulls.set(key, p);
    return p;
  }

  async #pullOnce(repo: string, options: PullOptions): Promise<PullResult> {
    const dir = this.dirFor(repo);
    const existed = existsSync(dir);
    try {
      return await this.#pull(repo, dir, options);
    } catch (err) {
      // A model the engine refused from its small files is not an unfinished pull to resume: what
      // this pull wrote into a folder it made goes again, so nothing half-there is listed or resumed.
      if (err instanceof ModelRefusedError && !existed) {
        await rm(dir, { recursive: true, force: true }).catch(() => undefined);
        removeEmptyParents(dirname(dir), this.root);
      }
      throw err;
    }
  }

  async #pull(repo: string, dir: string, options: PullOptions): Promise<PullResult> {
    await this.#assertWritable(dir);
    const listing = options.fromPod ? await this.#podListing(repo, options) : await this.hub.listRepo(repo, options.revision ?? 'main', options.signal);
    const previous = await this.readManifest(repo);
    const manifest: ModelManifest = {
      repo,
      commit: listing.commit,
      files: previous?.commit === listing.commit ? { ...previous.files } : {},
    };
    const files = chooseFiles(repo, listing.files, options);
    const result: PullResult = { dir, commit: listing.commit, sources: {}, hubBytes: 0, peerBytes: 0, bySource: {}, badPeers: [] };
    // A stage fetches only some tensors: its bytes are not known until the headers are in.
    if (!options.selection) await this.#assertSpace(repo, dir, files);
    // What is left to do goes on disk first: a crash from here on leaves a model that says it is incomplete.
    manifest.pending = files.map((f) => f.path);
    if (!options.selection) manifest.resume = { ...(options.quant ? { quant: options.quant } : {}), ...(options.fromPod ? { fromPod: true } : {}), ...(options.revision ? { revision: options.revision } : {}) };
    else delete manifest.resume;
    await this.#writeManifest(manifest);
    options.onPlan?.(files.map((f) => ({ file: f.path, size: f.size })));
    const keep = options.selection ? stageTensorFilter(options.selection) : undefined;
    const keyOf = (file: HubFile) => contentKey(file) ?? `path:${repo}@${listing.commit}/${file.path}`;

    /** One file (`fileKeep`: only those tensors of a safetensors file), its bytes counted into the result. */
    const pullOne = async (file: HubFile, fileKeep = keep): Promise<void> => {
      const key = keyOf(file);
      const label = `${repo}: ${file.path}`;
      const gguf = file.path.toLowerCase().endsWith('.gguf');
      const partial = !!fileKeep && (file.path.endsWith('.safetensors') || gguf);
      // A GGUF names its tensors as llama.cpp does: the stage's filter in those names.
      if (gguf && fileKeep === keep && options.selection) fileKeep = ggufStageTensorFilter(options.selection);
      const info: ChunkedFileInfo = { key, size: file.size, sha256: file.sha256, gitSha1: file.gitSha1, label };
      const path = join(dir, file.path);
      // A file an older store downloaded whole (no chunk log yet) is taken over after one hash check.
      const had = manifest.files[file.path];
      if (had?.complete && (await stat(path).catch(() => undefined))?.size === file.size) {
        const f = await this.chunks.open(path, info);
        if (f.verifiedCount === 0) await f.adopt();
      }
      const sourceOf = (bySource: Record<string, number>): FileSourceKind => {
        const hub = (bySource[HUB] ?? 0) > 0;
        const peer = Object.keys(bySource).some((k) => k !== HUB && bySource[k] > 0);
        return hub && peer ? 'peer+hub' : peer ? 'peer' : hub ? (partial ? 'hub-range' : 'hub') : 'local';
      };
      const r = await pullFile({
        registry: this.chunks,
        path,
        info,
        keep: partial ? fileKeep : undefined,
        route: {
          peers: async () => (options.pod ? await options.pod.holders(key, options.signal).catch(() => []) : []),
          pod: options.pod?.route(key, file.size, options.signal),
          hub: options.fromPod ? undefined : hubSource({ url: this.hub.fileUrl(repo, listing.commit, file.path), headers: this.hub.headers(), label }),
        },
        signal: options.signal,
        onProgress: (p) => options.onProgress?.({ file: file.path, source: sourceOf(p.bySource), done: p.done, total: p.total, bySource: p.bySource, links: p.links }),
        onBadPeer: (peer, chunk, why) => options.onBadPeer?.(peer, file.path, chunk, why),
        onLedgerUnreachable: options.onLedgerUnreachable,
      });
      result.sources[file.path] = sourceOf(r.bySource);
      for (const [source, n] of Object.entries(r.bySource)) {
        result.bySource[source] = (result.bySource[source] ?? 0) + n;
        if (source === HUB) result.hubBytes += n;
        else result.peerBytes += n;
      }
      for (const p of r.badPeers) if (!result.badPeers.includes(p)) result.badPeers.push(p);
      manifest.files[file.path] = { size: file.size, sha256: file.sha256, gitSha1: file.gitSha1, complete: r.complete, ...(r.complete ? {} : { tensors: r.tensors }) };
      // A header read for the check leaves the file pending: until its whole pull, the model is incomplete.
      if (r.complete || options.selection) manifest.pending = manifest.pending?.filter((p) => p !== file.path);
      await this.#writeManifest(manifest);
    };

    const weights = files.filter((f) => f.path.endsWith('.safetensors'));
    // A whole model goes through the engine's check first: the small files, then each weight file's
    // header; an unloadable model is refused before its weights move (a stage's pull was checked when placed).
    if (!options.selection && weights.length && files.some((f) => f.path === 'config.json')) {
      for (const f of files) if (!weights.includes(f)) await pullOne(f);
      const viaPod = !!options.pod || !!options.fromPod;
      const header = async (f: HubFile): Promise<Uint8Array> => {
        const local = manifest.files[f.path]?.complete ? await localHeader(join(dir, f.path), f.size) : undefined;
        if (local) return local;
        if (!viaPod) return readHubHeader(this.hub, repo, listing.commit, f, options.signal);
        // Through the pod: the chunks holding the header, from peers or once per pod from the hub.
        await pullOne(f, () => false);
        return this.#chunkedHeader(join(dir, f.path), { key: keyOf(f), size: f.size, sha256: f.sha256, gitSha1: f.gitSha1, label: `${repo}: ${f.path}` });
      };
      await checkModelFiles(repo, dir, weights, header, viaPod ? 1 : undefined);
      for (const f of weights) await pullOne(f);
    } else if (!options.selection && !options.fromPod && files.every((f) => f.path.toLowerCase().endsWith('.gguf')) && files.some((f) => !manifest.files[f.path]?.complete)) {
      // A GGUF (one file or a split set's parts): the chunks holding each header first (from peers, or
      // once per pod from the hub), checked by the engine on the files as they lie (no tensor byte is
      // read; a set is joined from its parts as the loader joins it), then the rest of their chunks.
      for (const f of files) await pullOne(f, () => false);
      const d = describeModelFiles(join(dir, files[0].path));
      if (!d.loadable) throw new ModelRefusedError(repo, d.reason);
      for (const f of files) await pullOne(f);
    } else {
      for (const f of files) await pullOne(f);
    }
    delete manifest.pending;
    delete manifest.resume;
    await this.#writeManifest(manifest);
    return result;
  }

  /** A safetensors header (its JSON) from the chunks of a file fetched at least that far. */
  async #chunkedHeader(path: string, info: ChunkedFileInfo): Promise<Uint8Array> {
    const f = await this.chunks.open(path, info);
    const end = headerEnd((await f.readChunk(0)).subarray(0, 8), info.size, info.label);
    const parts = [];
    for (const c of chunksCovering([[0, end]], info.size, f.chunkSize)) parts.push(await f.readChunk(c));
    return new Uint8Array(Buffer.concat(parts).subarray(8, end));
  }

  async #podListing(repo: string, options: PullOptions): Promise<HubRepo> {
    validateRepoId(repo);
    const listing = await options.pod?.listing(repo, options.signal).catch(() => undefined);
    if (!listing) throw new StoreError(`${repo}: no peer in the pod holds this model (pull it from the hub on one node first)`);
    return listing;
  }

  /** Stops serving and closes every open chunked file. */
  close(): Promise<void> {
    return this.chunks.closeAll();
  }
}

/** Removes `dir` and its parents below `root` while they are empty (the org folder a refused pull made). */
function removeEmptyParents(dir: string, root: string): void {
  for (let d = resolve(dir); d.startsWith(resolve(root) + '/'); d = dirname(d)) {
    try {
      if (readdirSync(d).length > 0) return;
      rmdirSync(d);
    } catch {
      return;
    }
  }
}
