/**
 * One file of a model onto this node: the whole file, or — for a safetensors or GGUF file and a
 * pipeline stage — its header first (to learn where the stage's tensors lie), then only the chunks
 * holding those tensors. Either way from peers first and the hub for the rest (fetch-file.ts). Afterwards a
 * complete file is checked against the hub's hash; a partial one gets a header listing the tensors
 * it holds, so the engine reads it as a valid checkpoint.
 */
import { StoreError } from '../errors.js';
import type { ChunkedFile, ChunkedFileInfo } from '../chunked/chunk-file.js';
import { chunksCovering } from '../chunked/layout.js';
import type { ChunkRegistry } from '../chunked/registry.js';
import { parseGgufLayout, type GgufLayout } from '../chunked/gguf-layout.js';
import { headerEnd, neededRanges, parseLayout, partialHeader, type SafetensorsLayout } from '../chunked/safetensors-layout.js';
import { fetchFile, type FileFetchProgress, type LinkStat, type PeerHandle, type PodRoute } from './fetch-file.js';
import type { HubSource } from './hub-source.js';

export interface FileRoute {
  /** Peers that have (or are fetching) some of this file, asked once per pull. */
  peers(): Promise<PeerHandle[]>;
  pod?: PodRoute;
  /** Absent: peers only. */
  hub?: HubSource;
}

export interface PullFileOptions {
  registry: ChunkRegistry;
  path: string;
  info: ChunkedFileInfo;
  /** Only these tensors, by the file's own names (a safetensors or GGUF file and a pipeline stage); absent: the whole file. */
  keep?: (tensor: string) => boolean;
  route: FileRoute;
  signal?: AbortSignal;
  onProgress?: (p: FileFetchProgress) => void;
  onBadPeer?: (peer: string, chunk: number, why: string) => void;
  onLedgerUnreachable?: (err: Error) => void;
}

export interface PullFileResult {
  /** The whole file is here and matched the hub's hash. */
  complete: boolean;
  /** For a partial file: the tensors it holds. */
  tensors?: string[];
  /** Bytes received, by source ("hub" or a peer id); empty when everything was here already. */
  bySource: Record<string, number>;
  badPeers: string[];
  links: LinkStat[];
}

export async function pullFile(o: PullFileOptions): Promise<PullFileResult> {
  const file = await o.registry.open(o.path, o.info);
  const peers = await o.route.peers();
  const bySource: Record<string, number> = {};
  const badPeers = new Set<string>();
  const trusted = new Set<number>();
  let links: LinkStat[] = [];
  let base = { done: 0, total: 0 };
  // The header's own fetch is not reported: its few chunks would show the file at 100% before the rest starts.
  const fetch = async (needed: number[], report = true) => {
    const r = await fetchFile({
      file,
      registry: o.registry,
      needed,
      peers,
      pod: o.route.pod,
      hub: o.route.hub,
      signal: o.signal,
      onBadPeer: o.onBadPeer,
      onLedgerUnreachable: o.onLedgerUnreachable,
      onProgress: (p) => report && o.onProgress?.({ ...p, bySource: sum(bySource, p.bySource), links: p.links }),
    });
    Object.assign(bySource, sum(bySource, r.bySource));
    for (const p of r.badPeers) badPeers.add(p);
    for (const c of r.trusted) trusted.add(c);
    if (r.links.length) links = r.links;
    base = { done: r.done, total: r.total };
    return r;
  };

  const safetensors = o.path.endsWith('.safetensors');
  const all = Array.from({ length: file.count }, (_, i) => i);
  let layout: SafetensorsLayout | undefined;
  let ggufLayout: GgufLayout | undefined;
  let needed = all;
  if (safetensors) {
    layout = await readLayout(file, (needed) => fetch(needed, false));
    if (o.keep) needed = chunksCovering(neededRanges(layout, o.keep), file.info.size, file.chunkSize);
    // Until it is complete, the file on disk lists only the tensors it holds: an engine that opens
    // it mid-download (or after a failed one) finds tensors missing, never zeros.
    if (!file.complete) await writePartialHeader(file, layout);
  } else if (o.keep && /\.gguf$/i.test(o.path)) {
    // A GGUF's header cannot shrink in place (its tensor table fixes the data offsets): it stays whole,
    // and the engine reads only the byte ranges of the tensors its stage holds.
    ggufLayout = await readGgufLayout(file, (needed) => fetch(needed, false));
    const keep = o.keep;
    needed = chunksCovering([[0, ggufLayout.headerEnd], ...ggufLayout.tensors.filter((t) => keep(t.name)).map((t) => [t.start, t.end] as [number, number])], file.info.size, file.chunkSize);
  }
  await fetch(needed);
  o.onProgress?.({ ...base, bySource, links });

  if (file.complete) {
    // Every chunk checked against a digest of a peer that verified the whole file: no second read.
    await file.verifyWhole({ trusted: trusted.size === file.count });
    return { complete: true, bySource, badPeers: [...badPeers], links };
  }
  if (ggufLayout) {
    await file.flush();
    return { complete: false, tensors: presentTensors(file, ggufLayout.tensors), bySource, badPeers: [...badPeers], links };
  }
  if (!layout) throw new StoreError(`${o.info.label}: only ${file.verifiedCount} of ${file.count} chunks arrived`);
  const present = await writePartialHeader(file, layout);
  await file.flush();
  return { complete: false, tensors: present, bySource, badPeers: [...badPeers], links };
}

/** Puts a header listing the tensors whose chunks are all here on the file; returns their names. */
async function writePartialHeader(file: ChunkedFile, layout: SafetensorsLayout): Promise<string[]> {
  const present = presentTensors(file, layout.tensors);
  await file.writeHeader(partialHeader(layout, new Set(present)));
  return present;
}

/** The tensors whose chunks are all here. */
function presentTensors(file: ChunkedFile, tensors: Array<{ name: string; start: number; end: number }>): string[] {
  return tensors.filter((t) => chunksCovering([[t.start, t.end]], file.info.size, file.chunkSize).every((c) => file.has(c))).map((t) => t.name);
}

/** First bytes fetched for a GGUF header: most small models' metadata fits; a large vocabulary takes a few rounds more. */
const GGUF_FIRST = 256 * 1024;

/** The file's GGUF layout, fetching chunks from byte 0 until the tensor table ends within them. */
async function readGgufLayout(file: ChunkedFile, fetch: (needed: number[]) => Promise<unknown>): Promise<GgufLayout> {
  const { size, label } = file.info;
  for (let want = Math.min(size, GGUF_FIRST); ; ) {
    await fetch(chunksCovering([[0, want]], size, file.chunkSize));
    const r = parseGgufLayout(await file.readRange(0, want), size, label);
    if (!('more' in r)) return r;
    if (want >= size) throw new StoreError(`${label}: the GGUF header does not end within the file`);
    want = Math.min(size, r.more);
  }
}

/** The file's safetensors layout, fetching the chunks that hold its header first. */
async function readLayout(file: ChunkedFile, fetch: (needed: number[]) => Promise<unknown>): Promise<SafetensorsLayout> {
  const { size, label } = file.info;
  await fetch(chunksCovering([[0, 8]], size, file.chunkSize));
  const end = headerEnd(await file.readRange(0, 8), size, label);
  await fetch(chunksCovering([[0, end]], size, file.chunkSize));
  return parseLayout(await file.readRange(0, end), size, label);
}

function sum(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = (out[k] ?? 0) + v;
  return out;
}
