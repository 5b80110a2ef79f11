/** Nodes and the measured links between them, drawn by kind; node cards with chip, memory and load. */
import { LINK_KINDS, bandwidth, bytes, latency, linkKind, ringLayout } from './format.js';
import type { ClusterView, InstanceView } from './types.js';

const W = 620;
const H = 380;

export function Topology({ cluster, instances }: { cluster: ClusterView; instances: InstanceView[] }) {
  const nodes = cluster.nodes;
  const pos = new Map(nodes.map((n, i) => [n.id, ringLayout(nodes.length, W, H, 48)[i]]));
  const name = (id: string) => nodes.find((n) => n.id === id)?.name ?? id.slice(-6);
  const ranksOn = (id: string) => instances.reduce((k, i) => k + i.nodes.filter((n) => n === id).length, 0);
  return (
    <div class="topology">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label="pod topology" data-testid="topology">
        {cluster.links.map((l) => {
          const a = pos.get(l.a);
          const b = pos.get(l.b);
          if (!a || !b) return null;
          const k = linkKind(l.kind);
          const mx = (a.x + b.x) / 2;
          const my = (a.y + b.y) / 2;
          return (
            <g class="link" data-link={`${name(l.a)}|${name(l.b)}`} data-kind={l.kind} key={`${l.a}|${l.b}`}>
              <line x1={a.x} y1={a.y} x2={b.x} y2={b.y} stroke={k.color} stroke-width={l.kind === 'rdma' ? 6 : 4} stroke-dasharray={k.dash} stroke-linecap="round" />
              <rect x={mx - 78} y={my - 19} width={156} height={38} rx={6} class="link-label-bg" />
              <text x={mx} y={my - 4} text-anchor="middle" class="link-kind" fill={k.color}>
                {k.label}
              </text>
              <text x={mx} y={my + 12} text-anchor="middle" class="link-figures">
                {latency(l.latencyUs)} · {bandwidth(l.bandwidthGbps)}
              </text>
            </g>
          );
        })}
        {nodes.map((n) => {
          const p = pos.get(n.id)!;
          const used = n.memoryBytes - n.availableBytes;
          const frac = n.memoryBytes > 0 ? Math.max(0, Math.min(1, used / n.memoryBytes)) : 0;
          return (
            <g class="node" data-node={n.name} key={n.id} transform={`translate(${p.x - 62},${p.y - 38})`}>
              <rect width={124} height={76} rx={10} class={n.id === cluster.coordinator ? 'node-box coordinator' : 'node-box'} />
              <text x={62} y={22} text-anchor="middle" class="node-name">
                {n.name}
              </text>
              <text x={62} y={38} text-anchor="middle" class="node-chip">
                {n.chip.length > 20 ? `${n.chip.slice(0, 19)}…` : n.chip}
              </text>
              <rect x={12} y={46} width={100} height={6} rx={3} class="mem-bg">
                <title>memory in use</title>
              </rect>
              <rect x={12} y={46} width={100 * frac} height={6} rx={3} class="mem-used" />
              <text x={62} y={68} text-anchor="middle" class="node-mem" data-testid="node-memory">
                memory {bytes(used)} / {bytes(n.memoryBytes)}
              </text>
            </g>
          );
        })}
        {nodes.length === 1 && (
          <text x={W / 2} y={H - 40} text-anchor="middle" class="topology-hint" data-testid="topology-alone">
            <tspan x={W / 2}>Only this machine so far. Run `orchard start` on another machine</tspan>
            <tspan x={W / 2} dy={16}>on the same network (or with --bootstrap) and it appears here, linked.</tspan>
          </text>
        )}
        {nodes.length === 0 && (
          <text x={W / 2} y={H / 2} text-anchor="middle" class="topology-hint">
            waiting for this node's first profile…
          </text>
        )}
      </svg>
      <div class="legend">
        {Object.entries(LINK_KINDS).map(([kind, k]) => (
          <span key={kind}>
            <svg width="26" height="8">
              <line x1="1" y1="4" x2="25" y2="4" stroke={k.color} stroke-width="4" stroke-dasharray={k.dash} />
            </svg>
            {k.label}
          </span>
        ))}
      </div>
      <table class="nodes" data-testid="node-table">
        <thead>
          <tr>
            <th>node</th>
            <th>chip</th>
            <th>memory used / total</th>
            <th>GPU cores</th>
            <th title="1-minute load average per core; ranks of loaded models">load</th>
          </tr>
        </thead>
        <tbody>
          {nodes.map((n) => (
            <tr key={n.id} data-node-row={n.name} title={n.id}>
              <td>
                <b>{n.name}</b>
                {n.id === cluster.coordinator && <span class="tag">coordinator</span>}
              </td>
              <td>{n.chip}</td>
              <td>
                {bytes(n.memoryBytes - n.availableBytes)} / {bytes(n.memoryBytes)}
              </td>
              <td>{n.gpuCores ?? '–'}</td>
              <td>
                <span title="1-minute load average per CPU core (1.00 = every core busy)">{n.load != null ? n.load.toFixed(2) : '–'}</span>
                {ranksOn(n.id) > 0 && ` · ${ranksOn(n.id)} rank${ranksOn(n.id) > 1 ? 's' : ''}`}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {cluster.paths.length > 0 && (
        <details class="paths">
          <summary>{cluster.paths.length} measured path{cluster.paths.length > 1 ? 's' : ''}</summary>
          <table>
            <tbody>
              {cluster.paths.map((p) => (
                <tr key={`${p.a}|${p.b}|${p.aInterface}|${p.bInterface}`}>
                  <td>
                    {name(p.a)} {p.aInterface} ↔ {name(p.b)} {p.bInterface}
                  </td>
                  <td>{linkKind(p.kind).label}</td>
                  <td>{latency(p.latencyUs)}</td>
                  <td>{bandwidth(p.bandwidthGbps)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </details>
      )}
    </div>
  );
}
