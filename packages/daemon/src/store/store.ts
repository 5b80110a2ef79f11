/**
 * The model store (`<data-dir>/models/ORG/NAME/`): each model is a plain Hugging Face directory the
 * engine loads as is, plus `.orchard-manifest.json` recording the pinned commit and, per file, its
 * checksum, chunk CIDs and whether it is whole or only some tensors.
 *
 * A pull takes each file from the cheapest place that has it: already on disk, a peer in the pod
 * (content-addressed chunks), or the hub — and for a pipeline stage only the tensors it needs.
 */
import { mkdir, readFile, stat, writeFile, readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { downloadFromPeers, manifestForFile, type ChunkSource, type FileManifest } from './chunks.js';
import { downloadFile } from './download.js';
import { StoreError } from './errors.js';
import { pickGguf } from './gguf-pick.js';
import os from 'node:os';
import { HubClient, validateRepoId, type HubFile } from './hub.js';
import { fetchSafetensorsSubset, stageTensorFilter, type TensorSelection } from './safetensors-range.js';

export const MANIFEST_FILE = '.orchard-manifest.json';

export interface StoredFile {
  size: number;
  sha256?: string;
  gitSha1?: string;
  /** Whole file on disk, or only the tensors listed. */
  complete: boolean;
  tensors?: string[];
  /** Present for complete LFS files: lets peers fetch them from us by chunk. */
  chunks?: FileManifest['chunks'];
}

export interface ModelManifest {
  repo: string;
  commit: string;
  files: Record<string, StoredFile>;
}

export type FileSourceKind = 'local' | 'peer' | 'hub' | 'hub-range';

export interface PullEvent {
  file: string;
  source: FileSourceKind;
  done: number;
  total: number;
}

export interface PullOptions {
  revision?: string;
  /** Only these tensors of the safetensors files (a pipeline stage); everything else whole. */
  selection?: TensorSelection;
  peers?: ChunkSource[];
  signal?: AbortSignal;
  onProgress?: (e: PullEvent) => void;
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
    p === 'special_tokens_map.json' ||
    p === 'chat_template.jinja' ||
    p === 'chat_template.json'
  );
}

/**
 * A Hugging Face model directory (config.json + safetensors + tokenizer), or — for a GGUF repo, or when
 * a quantisation is named — the one .gguf file chosen by pickGguf.
 */
function chooseFiles(repo: string, all: HubFile[], o: PullOptions): HubFile[] {
  const hf = all.filter(wanted);
  const isHf = hf.some((f) => f.path === 'config.json') && hf.some((f) => f.path.endsWith('.safetensors'));
  if (isHf && !o.quant) return hf;
  if (hf.some((f) => f.path === 'config.json') && !all.some((f) => f.path.endsWith('.gguf'))) {
    throw new StoreError(`${repo}: the repo has no .safetensors weights and no .gguf file (other formats are not supported)`);
  }
  return [pickGguf(repo, all, { quant: o.quant, budgetBytes: o.budgetBytes ?? Math.floor(os.totalmem() * 0.75) })];
}

export class ModelStore {
  readonly root: string;
  readonly hub: HubClient;

  constructor(dataDir: string, hub = new HubClient()) {
    this.root = resolve(dataDir, 'models');
    this.hub = hub;
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
    await writeFile(join(this.dirFor(m.repo), MANIFEST_FILE), `${JSON.stringify(m, null, 2)}\n`);
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

  async pull(repo: string, options: PullOptions = {}): Promise<PullResult> {
    const dir = this.dirFor(repo);
    await mkdir(dir, { recursive: true });
    const listing = await this.hub.listRepo(repo, options.revision ?? 'main', options.signal);
    const previous = await this.readManifest(repo);
    const manifest: ModelManifest = {
      repo,
      commit: listing.commit,
      files: previous?.commit === listing.commit ? { ...previous.files } : {},
    };
    const files = chooseFiles(repo, listing.files, options);
    const result: PullResult = { dir, commit: listing.commit, sources: {}, hubBytes: 0, peerBytes: 0 };
    options.onPlan?.(files.map((f) => ({ file: f.path, size: f.size })));
    const keep = options.selection ? stageTensorFilter(options.selection) : undefined;

    for (const file of files) {
      const dest = join(dir, file.path);
      const label = `${repo}: ${file.path}`;
      const progress = (source: FileSourceKind) => (done: number, total: number) =>
        options.onProgress?.({ file: file.path, source, done, total });
      const have = manifest.files[file.path];
      const onDisk = await stat(dest).catch(() => undefined);
      const partialWanted = keep && file.path.endsWith('.safetensors');
      if (have && onDisk && (have.complete ? have.size === onDisk.size : partialWanted)) {
        result.sources[file.path] = 'local';
        progress('local')(file.size, file.size);
        continue;
      }
      const url = this.hub.fileUrl(repo, listing.commit, file.path);
      if (partialWanted) {
        const r = await fetchSafetensorsSubset({ url, dest, label, keep: keep!, headers: this.hub.headers() });
        manifest.files[file.path] = { size: file.size, sha256: file.sha256, complete: false, tensors: r.tensors };
        result.sources[file.path] = 'hub-range';
        result.hubBytes += r.fetchedBytes;
        progress('hub-range')(r.fetchedBytes, r.fetchedBytes);
        await this.#writeManifest(manifest);
        continue;
      }
      let fromPeer = false;
      if (file.sha256 && options.peers?.length) {
        try {
          const r = await downloadFromPeers(file.sha256, file.size, options.peers, dest, label, {
            signal: options.signal,
            onProgress: progress('peer'),
          });
          result.peerBytes += Object.values(r.bytesBySource).reduce((a, b) => a + b, 0);
          fromPeer = true;
        } catch {
          /* fall back to the hub */
        }
      }
      if (!fromPeer) {
        const r = await downloadFile({
          url,
          dest,
          size: file.size,
          sha256: file.sha256,
          gitSha1: file.gitSha1,
          label,
          headers: this.hub.headers(),
          signal: options.signal,
          onProgress: progress('hub'),
        });
        result.hubBytes += r.fetched;
      }
      result.sources[file.path] = fromPeer ? 'peer' : 'hub';
      const chunks = file.sha256 ? (await manifestForFile(dest)).chunks : undefined;
      manifest.files[file.path] = { size: file.size, sha256: file.sha256, gitSha1: file.gitSha1, complete: true, chunks };
      await this.#writeManifest(manifest);
    }
    await this.#writeManifest(manifest);
    return result;
  }

  /** This node's store as a chunk source for peers: complete files only, looked up by SHA-256. */
  localChunkSource(name = 'local'): ChunkSource {
    const find = async (pred: (f: StoredFile, path: string, m: ModelManifest) => boolean) => {
      for (const m of await this.list()) {
        for (const [path, f] of Object.entries(m.files)) if (pred(f, path, m)) return { m, path, f };
      }
      return undefined;
    };
    return {
      name,
      manifest: async (sha256) => {
        const hit = await find((f) => f.complete && f.sha256 === sha256 && !!f.chunks);
        return hit ? { size: hit.f.size, sha256, chunks: hit.f.chunks! } : undefined;
      },
      chunk: async (cid) => {
        const hit = await find((f) => !!f.complete && !!f.chunks?.some((c) => c.cid === cid));
        if (!hit) throw new StoreError(`no local chunk ${cid}`);
        const ref = hit.f.chunks!.find((c) => c.cid === cid)!;
        const { open } = await import('node:fs/promises');
        const fh = await open(join(this.dirFor(hit.m.repo), hit.path), 'r');
        try {
          const buf = new Uint8Array(ref.length);
          await fh.read(buf, 0, ref.length, ref.offset);
          return buf;
        } finally {
          await fh.close();
        }
      },
    };
  }
}
