/** Numbers for people. Pure. */

/** Sizes in binary units, as `orchard status` writes memory (GiB): the two must read the same. */
export function bytes(n: number | null | undefined): string {
  if (n == null || !Number.isFinite(n)) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

export function latency(us: number | null | undefined): string {
  if (us == null || !Number.isFinite(us)) return '–';
  return us >= 1000 ? `${(us / 1000).toFixed(us >= 10_000 ? 0 : 1)} ms` : `${Math.round(us)} µs`;
}

export function bandwidth(gbps: number | null | undefined): string {
  if (gbps == null || !Number.isFinite(gbps)) return '–';
  return gbps >= 1 ? `${gbps.toFixed(gbps >= 10 ? 0 : 1)} Gb/s` : `${Math.round(gbps * 1000)} Mb/s`;
}

export function rate(tps: number | null | undefined): string {
  if (tps == null || !Number.isFinite(tps)) return '–';
  return `${tps >= 100 ? Math.round(tps) : tps.toFixed(1)} tok/s`;
}

/** Replaces peer ids in planner text with node names. */
export function withNames(text: string, names: Map<string, string>): string {
  let out = text;
  for (const [id, name] of names) if (id) out = out.split(id).join(name);
  return out;
}

/** Where a download's bytes came from: "hub 10 MB · studio-a 50 MB" (peers by name). */
export function downloadSources(sources: Record<string, number> | undefined, names: Map<string, string>): string {
  return Object.entries(sources ?? {})
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k === 'hub' ? 'hub' : (names.get(k) ?? k.slice(-8))} ${bytes(n)}`)
    .join(' · ');
}

/** The links a download uses and their measured rates: "studio-a 10.0.0.1:4000 950 MB/s · hub 12 MB/s". */
export function downloadLinks(links: Array<{ source: string; link: string; rate: number }> | undefined, names: Map<string, string>): string {
  return (links ?? []).map((l) => (l.source === 'hub' ? `hub ${bytes(l.rate)}/s` : `${names.get(l.source) ?? l.source.slice(-8)} ${l.link} ${bytes(l.rate)}/s`)).join(' · ');
}

export function percent(done: number, total: number): string {
  if (!(total > 0)) return '–';
  return `${Math.min(100, Math.floor((done / total) * 100))}%`;
}

export const LINK_KINDS = {
  rdma: { label: 'RDMA', color: '#a855f7', dash: '' },
  thunderbolt: { label: 'Thunderbolt TCP', color: '#f59e0b', dash: '' },
  ethernet: { label: 'Ethernet', color: '#3b82f6', dash: '' },
  wifi: { label: 'Wi-Fi', color: '#94a3b8', dash: '6 5' },
} as const;

export type LinkKind = keyof typeof LINK_KINDS;

export function linkKind(kind: string): (typeof LINK_KINDS)[LinkKind] {
  return LINK_KINDS[kind as LinkKind] ?? { label: kind, color: '#64748b', dash: '2 4' };
}

/** Positions for n nodes on a circle inside a w×h box (one node in the middle, two side by side). */
export function ringLayout(n: number, w: number, h: number, margin = 70): { x: number; y: number }[] {
  const cx = w / 2;
  const cy = h / 2;
  if (n === 1) return [{ x: cx, y: cy }];
  const r = Math.max(10, Math.min(w, h) / 2 - margin);
  return Array.from({ length: n }, (_, i) => {
    const a = -Math.PI / 2 + (2 * Math.PI * i) / n + (n === 2 ? Math.PI / 2 : 0);
    return { x: Math.round(cx + r * Math.cos(a) * (w / Math.min(w, h)) * 0.9), y: Math.round(cy + r * Math.sin(a)) };
  });
}

/** A hub model's plan before its pull, in words: the verdict, then one line per node (bytes it would hold of what it has). */
export function hubPlanText(p: { repo: string; loadable: boolean; fits: boolean; weightsBytes: number; strategy: string | null; nodes: Array<{ node: string; name: string | null; weightsBytes: number; totalBytes: number; availableBytes: number }>; decodeTokensPerSecond: number | null; reason: string | null }, names: Map<string, string> = new Map()): { verdict: string; nodes: string[] } {
  if (!p.loadable) return { verdict: `${p.repo} cannot be loaded: ${p.reason ?? 'refused by the engine'}`, nodes: [] };
  const size = bytes(p.weightsBytes);
  if (!p.fits) return { verdict: `${p.repo} (${size} of weights) does not fit this pod: ${withNames(p.reason ?? '', names)}`, nodes: [] };
  const over = p.nodes.length === 1 ? 'on 1 node' : `over ${p.nodes.length} nodes`;
  return {
    verdict: `${p.repo} (${size} of weights) fits ${over} (${p.strategy}), ${rate(p.decodeTokensPerSecond)} predicted`,
    nodes: p.nodes.map((n) => `${n.name ?? names.get(n.node) ?? n.node.slice(-8)}: ${bytes(n.weightsBytes)} of weights, ${bytes(n.totalBytes)} in all of ${bytes(n.availableBytes)} free`),
  };
}
