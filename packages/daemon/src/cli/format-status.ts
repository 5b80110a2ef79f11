/** Human-readable `orchard status`. Pure: JSON in, text out. */
import type { LinkMeasurement } from '../links/types.js';
import type { NodeEntry } from '../state/types.js';
import type { InstanceLink } from '../serving/link-report.js';
import type { Progress } from '../dashboard/progress.js';

/** One instance's data-plane links as /api/instances reports them (each link end, per rank). */
export interface DataPlaneJson {
  instance: string;
  model: string;
  ranks: number;
  links: InstanceLink[];
}

export interface StatusJson {
  self: { peerId: string; name: string };
  mode: 'open' | 'private';
  clusterKeyId: string | null;
  coordinator: string | null;
  nodes: NodeEntry[];
  links: LinkMeasurement[];
  notInCluster: { peerId: string; message: string }[];
  unreachable: { peerId: string; message: string }[];
  duplicateIdentity: { message: string } | null;
  duplicatePeers?: string[];
  thunderboltCables?: { bus: string; peerId: string; peerBus: string; speedGbps: number | null }[];
  /** Added by `orchard status` from /api/instances: which transport each instance's links use, and why. */
  dataPlane?: DataPlaneJson[];
  /** Added by `orchard status` from /api/dashboard/progress: each node's downloads, by source and link. */
  downloads?: Progress[];
  /** Models placement gave up on until someone loads them again. */
  failedModels?: { model: string; reason: string; attempts: number }[];
  /** Members this node cannot reach, whether the pod looks split, the last heal (state/partition.ts). */
  partition?: {
    unreachable: { peerId: string; name: string | null; since: number | null; cause: 'no-answer' | 'refused' | 'silent'; message: string }[];
    split: boolean;
    message: string | null;
    lastHeal: { from: string; agoSec: number; superseded: { model: string; keeper: string; retiring: string }[] } | null;
  };
}

/** A heal older than this is history, not news: not shown. */
const RECENT_HEAL_SEC = 600;

const gib = (b: number) => `${(b / 2 ** 30).toFixed(1)} GiB`;
const short = (id: string) => (id.length > 16 ? `${id.slice(0, 8)}…${id.slice(-6)}` : id);

export function formatStatus(s: StatusJson): string {
  const names = new Map(s.nodes.map((n) => [n.peerId, n.name]));
  const live = s.nodes.filter((n) => n.status === 'live');
  const lines: string[] = [];
  lines.push(
    s.mode === 'private'
      ? `pod: private (cluster key ${s.clusterKeyId}), ${live.length} node(s)`
      : `pod: open (any Orchard daemon on this network may join; \`orchard key new\` makes it private), ${live.length} node(s)`,
  );
  const part = s.partition;
  if (part?.message) lines.push(`${part.split ? 'WARNING: pod split' : 'unreachable'}: ${part.message}`);
  if (part?.lastHeal && part.lastHeal.agoSec <= RECENT_HEAL_SEC) {
    const h = part.lastHeal;
    const retiring = h.superseded.map((x) => `${x.retiring} (${x.model}) retires once idle, ${x.keeper} kept`).join('; ');
    lines.push(`pod re-formed ${h.agoSec} s ago after a split: merged the state of ${names.get(h.from) ?? short(h.from)}'s side${retiring ? `; ${retiring}` : ''}`);
  }
  if (s.duplicateIdentity) lines.push(`WARNING: ${s.duplicateIdentity.message}`);
  for (const p of s.duplicatePeers ?? []) lines.push(`WARNING: peer ${p} runs on two machines at once (copied data dir); delete peer.key on one of them and restart it`);
  lines.push('', 'nodes:');
  for (const n of [...s.nodes].sort((a, b) => (a.peerId < b.peerId ? -1 : 1))) {
    const p = n.profile;
    const tags = [n.peerId === s.self.peerId ? 'this node' : '', n.peerId === s.coordinator ? 'coordinator' : ''].filter(Boolean).join(', ');
    const hw = p
      ? `${p.chip}, ${p.cpu.cores} cores${p.cpu.performanceCores ? ` (${p.cpu.performanceCores}P+${p.cpu.efficiencyCores}E)` : ''}${p.gpuCores ? `, ${p.gpuCores} GPU cores` : ''}, ${gib(p.memory.availableBytes)} free of ${gib(p.memory.totalBytes)}` +
        (p.capability ? `, ${p.capability.memoryBandwidthGBps.toFixed(1)} GB/s, ${p.capability.matmulGflops.toFixed(1)} GFLOP/s` : '') +
        (p.gpu ? `; runners on GPU ${p.gpu.adapter}, ${p.gpu.copyBandwidthGBps.toFixed(1)} GB/s copy${p.gpu.memoryBytes ? `, ${gib(p.gpu.memoryBytes)} GPU-visible` : ''}` : '')
      : 'profile pending';
    const cause = part?.unreachable.find((u) => u.peerId === n.peerId)?.cause;
    const reach = cause === 'no-answer' ? ', no answer: split?' : cause === 'refused' ? ', refuses connections' : '';
    lines.push(`  ${n.status === 'live' ? '●' : '○'} ${n.name} ${short(n.peerId)}${tags ? ` [${tags}]` : ''}${n.status === 'gone' ? ` gone (${n.leftReason}${reach})` : ''}`);
    lines.push(`      ${hw}`);
    if (p?.rdma.summary) lines.push(`      ${p.rdma.summary}`);
  }
  lines.push('', 'links:');
  if (s.links.length === 0) lines.push('  (none measured yet)');
  for (const l of s.links) {
    lines.push(
      `  ${names.get(l.a) ?? short(l.a)} <-> ${names.get(l.b) ?? short(l.b)}  ${l.kind}${l.rdmaCapable ? ' (RDMA)' : ''} via ${l.aInterface}->${l.address}  ${Math.round(l.latencyUs)} us  ${l.bandwidthGbps.toFixed(2)} Gbit/s`,
    );
  }
  for (const r of s.notInCluster) lines.push(`  ${r.message}`);
  if (s.thunderboltCables?.length) {
    lines.push('', 'thunderbolt cables (this node):');
    for (const c of s.thunderboltCables) lines.push(`  ${c.bus} -> ${names.get(c.peerId) ?? short(c.peerId)} (${c.peerBus})${c.speedGbps ? `, ${c.speedGbps} Gb/s` : ''}`);
  }
  if (s.dataPlane?.length) lines.push('', 'data plane (per instance, rank <-> rank):', ...s.dataPlane.flatMap(formatDataPlane));
  if (s.downloads?.length) lines.push('', 'downloads (per node, bytes by source):', ...s.downloads.flatMap((d) => formatDownload(d, names)));
  if (s.failedModels?.length) {
    lines.push('', 'failed models (not placed again until `orchard load MODEL`):');
    for (const f of s.failedModels) lines.push(`  ${f.model}: ${f.reason} (${f.attempts} attempts)`);
  }
  return `${lines.join('\n')}\n`;
}

const mb = (b: number) => (b >= 1e9 ? `${(b / 1e9).toFixed(2)} GB` : `${(b / 1e6).toFixed(1)} MB`);

/** A node's download: phase, share done, bytes from the hub and from each peer, each link's rate. */
export function formatDownload(d: Progress, names: Map<string, string>): string[] {
  const who = (id: string) => (id === 'hub' ? 'hub' : (names.get(id) ?? short(id)));
  const phase =
    d.phase === 'download'
      ? `downloading ${d.total ? Math.floor((100 * d.done) / d.total) : 0}% of ${mb(d.total)}`
      : d.phase === 'load'
        ? `loading weights (${mb(d.total)})`
        : d.phase === 'failed'
          ? `failed: ${d.message ?? 'unknown error'}`
          : 'ready';
  const sources = Object.entries(d.sources ?? {}).filter(([, n]) => n > 0);
  const from = sources.length ? `: ${sources.map(([k, n]) => `${who(k)} ${mb(n)}`).join(', ')}` : '';
  const lines = [`  ${who(d.node)}  ${d.model}  ${phase}${from}`];
  if (d.phase === 'download' && d.links?.length) lines.push(`      links: ${d.links.map((l) => `${who(l.source)}${l.source === 'hub' ? '' : ` ${l.link}`} ${mb(l.rate)}/s${l.encryption === undefined ? '' : l.encryption ? ` encrypted (${l.encryption})` : ' unencrypted'}`).join(', ')}`);
  for (const p of d.badPeers ?? []) lines.push(`      dropped ${who(p)}: it served bytes that do not match the pod digest`);
  return lines;
}

/** ", encrypted (aes-256-gcm)" / ", unencrypted" when the ends reported it (both ends see the same cipher). */
function protection(ends: InstanceLink[]): string {
  const known = ends.filter((e) => e.encryption !== undefined);
  if (known.length === 0) return '';
  const cipher = known.find((e) => e.encryption)?.encryption;
  return cipher ? `, encrypted (${cipher})` : ', unencrypted';
}

/** One line per pair of ranks: both ends agree on the transport; each end may say why differently. */
export function formatDataPlane(d: DataPlaneJson): string[] {
  const lines = [`  ${d.instance} (${d.model}, ${d.ranks} rank${d.ranks === 1 ? '' : 's'})`];
  if (d.ranks > 1 && d.links.length === 0) lines.push('    links not reported yet (runners still starting)');
  const pairs = new Map<string, InstanceLink[]>();
  for (const l of d.links) {
    const key = `${Math.min(l.rank, l.peer)}-${Math.max(l.rank, l.peer)}`;
    pairs.set(key, [...(pairs.get(key) ?? []), l]);
  }
  const sorted = [...pairs].sort(([a], [b]) => a.localeCompare(b, 'en', { numeric: true }));
  for (const [key, ends] of sorted) {
    const [a, b] = key.split('-');
    const rdmaEnds = ends.filter((e) => e.transport === 'rdma');
    const text =
      rdmaEnds.length === ends.length
        ? `RDMA (${ends.map((e) => `rank ${e.rank} on ${e.reason}`).join(', ')})`
        : `TCP (${[...new Set(ends.filter((e) => e.transport !== 'rdma').map((e) => e.reason))].join('; ')})${protection(ends)}`;
    lines.push(`    ${a} <-> ${b}  ${text}`);
  }
  return lines;
}
