/**
 * One file of a model onto this node: the whole file, or — for a safetensors file and a pipeline
 * stage — its header first (to learn where the stage's tensors lie), then only the chunks holding
 * those tensors. Either way from peers first and the hub for the rest (fetch-file.ts). Afterwards a
 * complete file is checked against the hub's hash; a partial one gets a header listing the tensors
 * it holds, so the engine reads it as a valid checkpoint.
 */
import { StoreError } from '../errors.js';
import type { ChunkedFile, ChunkedFileInfo } from '../chunked/chunk-file.js';
import { chunksCovering } from '../chunked/layout.js';
import type { ChunkRegistry } from '../chunked/registry.js';
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
  /** Only these tensors (a safetensors file and a pipeline stage); absent: the whole file. */
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
  /** For a partial safetensors file: the tensors it holds. */
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
  const fetch = async (needed: number[]) => {
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
      onProgress: (p) => o.onProgress?.({ ...p, bySource: sum(bySource, p.bySource), links: p.links }),
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
  let needed = all;
  if (safetensors) {
    layout = await readLayout(file, fetch);
    if (o.keep) needed = chunksCovering(neededRanges(layout, o.keep), file.info.size, file.chunkSize);
    // Until it is complete, the file on disk lists only the tensors it holds: an engine that opens
    // it mid-download (or after a failed one) finds tensors missing, never zeros.
    if (!file.complete) await writePartialHeader(file, layout);
  }
  await fetch(needed);
  o.onProgress?.({ ...base, bySource, links });

  if (file.complete) {
    // Every chunk checked against a digest of a peer that verified the whole file: no second read.
    await file.verifyWhole({ trusted: trusted.size === file.count });
    return { complete: true, bySource, badPeers: [...badPeers], links };
  }
  if (!layout) throw new StoreError(`${o.info.label}: only ${file.verifiedCount} of ${file.count} chunks arrived`);
  const present = await writePartialHeader(file, layout);
  await file.flush();
  return { complete: false, tensors: present, bySource, badPeers: [...badPeers], links };
}

/** Puts a header listing the tensors whose chunks are all here on the file; returns their names. */
async function writePartialHeader(file: ChunkedFile, layout: SafetensorsLayout): Promise<string[]> {
  const present = layout.tensors.filter((t) => chunksCovering([[t.start, t.end]], file.info.size, file.chunkSize).every((c) => file.has(c))).map((t) => t.name);
  await file.writeHeader(partialHeader(layout, new Set(present)));
  return present;
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
