/** `orchard network status` as text: who this node is on the network, every node seen, balances, recent jobs. */
import type { NetworkStatus } from '../network/status.js';

const short = (peer: string) => `…${peer.slice(-8)}`;
const gib = (bytes: number) => (bytes > 0 ? `${Math.round(bytes / 2 ** 30)} GiB` : '?');
/** Micro-credits as credits with up to 6 decimals. */
export const credits = (micro: number) => `${(micro / 1e6).toFixed(6).replace(/\.?0+$/, '')}`;

function table(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i])).join('  ').trimEnd()).join('\n');
}

export function formatNetworkStatus(s: NetworkStatus): string {
  const out: string[] = [];
  const reach = s.self.reachable === true ? 'reachable directly' : s.self.reachable === false ? `behind NAT, reachable through ${s.self.relayReservations.length} relay reservation(s)` : 'reachability not known yet';
  out.push(`network ${s.network}: this node ${s.self.peer} (${reach})`);
  const l = s.lending;
  out.push(
    l.enabled
      ? `lending: on, ${l.mode === 'idle' ? 'only while idle' : `up to ${Math.round(l.share * 100)}% of the pod`}, ${l.pricePer1M} credits per 1M tokens, at most ${l.maxTokensPerJob} tokens per job; ${l.running} running, ${l.served} served, ${l.refused} refused, ${l.preempted} preempted`
      : 'lending: off (orchard lend on)',
  );
  out.push(`routing: ${s.routing.enabled ? `requests for models this pod lacks go to the network${s.routing.priceCap !== null ? `, at most ${s.routing.priceCap} credits per 1M tokens` : ''}${s.routing.trusted ? `, only to ${s.routing.trusted.length} trusted peer(s)` : ''}` : 'off'}`);
  out.push('');
  if (!s.nodes.length) out.push('no offers heard yet');
  else {
    const rows = [['pod', 'peer', 'state', 'region', 'nodes', 'models', 'served', 'rtt', 'path', 'rep']];
    for (const n of s.nodes) {
      rows.push([
        `${n.pod}${n.self ? ' (this)' : ''}`,
        short(n.peer),
        n.online ? 'online' : 'offline',
        n.region?.label ?? '-',
        n.nodes.map((x) => `${x.chip} ${gib(x.memoryBytes)}`).join(', '),
        n.models.map((m) => `${m.name}${m.state === 'loadable' ? ' (loadable)' : ''}${m.decodeTps ? ` ${m.decodeTps.toFixed(0)} tok/s` : ''}`).join(', ') || '-',
        `${n.tokensServed} tok`,
        n.rttMs === null ? '-' : `${Math.round(n.rttMs)} ms`,
        n.path ?? '-',
        n.reputation.toFixed(2),
      ]);
    }
    out.push(table(rows));
  }
  if (s.balances.length) {
    out.push('', `balances from ${s.receipts} receipt(s) (credits):`);
    const rows = [['peer', 'earned', 'spent', 'net', 'served', 'used']];
    for (const b of [...s.balances].sort((x, y) => y.net - x.net)) rows.push([b.peer === s.self.peer ? `${short(b.peer)} (this)` : short(b.peer), credits(b.earned), credits(b.spent), credits(b.net), `${b.tokensServed} tok`, `${b.tokensRequested} tok`]);
    out.push(table(rows));
  }
  if (s.jobs.length) {
    out.push('', 'recent jobs:');
    for (const j of s.jobs.slice(0, 10)) {
      const how = [j.path, j.found === 'dht' ? 'found via DHT' : null, j.tried.length ? `after ${j.tried.map((t) => `${short(t.peer)} ${t.code}`).join(', ')}` : null].filter(Boolean).join(', ');
      out.push(`  ${new Date(j.at).toISOString().slice(11, 19)} ${j.role} ${j.model} ${j.role === 'served' ? 'for' : 'by'} ${short(j.peer)}: ${j.ok ? `${j.tokens} tokens, ${credits(j.charge)} credits` : `failed (${j.error})`}${how ? ` [${how}]` : ''}`);
    }
  }
  return `${out.join('\n')}\n`;
}
