/**
 * The Network page: every node and pod this daemon heard on the wide-area network, on a world map
 * (Natural Earth's 1:110m land, public domain, bundled: world-map.ts) at the coarse place each pod
 * declares, with what it serves, the tokens it served by the receipts seen, balances and recent
 * jobs; and the switch that lends this pod's idle time.
 */
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError, getJson, sendJson } from './api.js';
import { bytes, rate } from './format.js';
import type { NetworkNodeView, NetworkView } from './types.js';
import { LAND_PATH, MAP_HEIGHT, MAP_WIDTH } from './world-map.js';

const short = (peer: string) => `…${peer.slice(-8)}`;
const credits = (micro: number) => (micro / 1e6).toFixed(micro % 1e6 === 0 ? 0 : 3);

/** Equirectangular, the same projection the bundled land outline uses. */
export function project(lat: number, lon: number): { x: number; y: number } {
  return { x: ((lon + 180) / 360) * MAP_WIDTH, y: ((90 - lat) / 180) * MAP_HEIGHT };
}

/** Pods at the same place get spread on a small circle so each stays visible. */
function placed(nodes: NetworkNodeView[]): { n: NetworkNodeView; x: number; y: number }[] {
  const groups = new Map<string, NetworkNodeView[]>();
  for (const n of nodes) {
    if (!n.region) continue;
    const k = `${n.region.lat},${n.region.lon}`;
    groups.set(k, [...(groups.get(k) ?? []), n]);
  }
  return [...groups.values()].flatMap((g) =>
    g.map((n, i) => {
      const p = project(n.region!.lat, n.region!.lon);
      const r = g.length > 1 ? 2.5 : 0;
      return { n, x: p.x + r * Math.cos((2 * Math.PI * i) / g.length), y: p.y + r * Math.sin((2 * Math.PI * i) / g.length) };
    }),
  );
}

function WorldMap({ nodes }: { nodes: NetworkNodeView[] }) {
  return (
    <svg class="world" viewBox={`0 0 ${MAP_WIDTH} ${MAP_HEIGHT * 0.83}`} role="img" aria-label="network map" data-testid="network-map">
      <path d={LAND_PATH} class="land" />
      {placed(nodes).map(({ n, x, y }) => (
        <g key={n.peer} data-peer={n.peer} class={`pin ${n.self ? 'self' : n.online ? 'online' : 'offline'}`}>
          <circle cx={x} cy={y} r={n.self ? 2.4 : 1.8} />
          <title>
            {`${n.pod}${n.self ? ' (this pod)' : ''} — ${n.region?.label}\n${n.nodes.map((x) => `${x.chip} ${bytes(x.memoryBytes)}`).join(', ')}\n${n.models.map((m) => m.name).join(', ') || 'lends nothing'}\n${n.online ? 'online' : 'offline'}, ${n.tokensServed} tokens served`}
          </title>
        </g>
      ))}
    </svg>
  );
}

function LendSwitch({ view, onChange }: { view: NetworkView; onChange: () => void }) {
  const [error, setError] = useState<string | null>(null);
  const set = async (body: object) => {
    setError(null);
    try {
      await sendJson('PUT', '/api/network/lending', body);
      onChange();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const l = view.lending;
  return (
    <div class="lend">
      <label>
        <input type="checkbox" data-testid="lend-switch" checked={l.enabled} onChange={(e) => void set({ enabled: (e.target as HTMLInputElement).checked })} /> Lend this pod's time to the network
      </label>
      <select value={l.mode} disabled={!l.enabled} onChange={(e) => void set({ mode: (e.target as HTMLSelectElement).value })}>
        <option value="idle">only while idle</option>
        <option value="share">up to a share</option>
      </select>
      <span class="muted">
        {l.enabled ? `${l.pricePer1M} credits per 1M tokens · ${l.served} served · ${l.refused} refused · ${l.preempted} preempted` : 'nothing is lent until you turn this on; local requests always come first'}
      </span>
      {error && <p class="error">{error}</p>}
    </div>
  );
}

export function Network() {
  const [view, setView] = useState<NetworkView | null>(null);
  const [absent, setAbsent] = useState<string | null>(null);
  const refresh = useCallback(async () => {
    try {
      // Asked first, so a node in no network is never asked for a view it does not have (a 404 each time).
      const joined = await getJson<{ joined: boolean; message?: string }>('/api/network/joined');
      if (!joined.joined) return setAbsent(joined.message ?? 'this node has not joined a network');
      setView(await getJson<NetworkView>('/api/network'));
      setAbsent(null);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) setAbsent(err.message);
    }
  }, []);
  useEffect(() => {
    void refresh();
    const t = setInterval(refresh, 3000);
    return () => clearInterval(t);
  }, [refresh]);

  if (absent) {
    return (
      <section class="card" data-testid="network-absent">
        <h2>Network</h2>
        <p>{absent}</p>
        <p class="muted">Nothing is shared, lent or routed until this node joins a network.</p>
      </section>
    );
  }
  if (!view) return <p class="muted">asking the daemon…</p>;
  const online = view.nodes.filter((n) => n.online).length;
  return (
    <div class="network">
      <section class="card">
        <h2>
          Network {view.network} <span class="tag">{online} online</span> <span class="tag">{view.nodes.length} seen</span>
        </h2>
        <p class="muted">
          this node {short(view.self.peer)} ·{' '}
          {view.self.reachable === true ? 'reachable directly' : view.self.reachable === false ? `behind NAT, through ${view.self.relayReservations.length} relay(s)` : 'reachability unknown yet'} ·{' '}
          {view.routing.enabled ? 'requests for models this pod lacks go to the network' : 'routing to the network is off'}
        </p>
        <LendSwitch view={view} onChange={refresh} />
        <WorldMap nodes={view.nodes} />
        {view.nodes.some((n) => !n.region) && <p class="muted">{view.nodes.filter((n) => !n.region).length} pod(s) declare no region and are listed below only.</p>}
      </section>
      <section class="card">
        <h2>Pods</h2>
        <table data-testid="network-nodes">
          <thead>
            <tr>
              <th>pod</th>
              <th>where</th>
              <th>machines</th>
              <th>models</th>
              <th>served</th>
              <th>rtt</th>
              <th>path</th>
              <th>trust</th>
            </tr>
          </thead>
          <tbody>
            {view.nodes.map((n) => (
              <tr key={n.peer} data-peer={n.peer} class={n.online ? '' : 'offline'}>
                <td>
                  {n.pod}
                  {n.self && <span class="tag">this pod</span>}
                  {!n.online && <span class="tag">offline</span>}
                </td>
                <td>{n.region?.label ?? '–'}</td>
                <td>{n.nodes.map((x) => `${x.chip} · ${bytes(x.memoryBytes)}`).join(', ')}</td>
                <td>{n.models.map((m) => `${m.name}${m.state === 'loadable' ? ' (loadable)' : ''}${m.decodeTps ? ` ${rate(m.decodeTps)}` : ''}`).join(', ') || '–'}</td>
                <td>{n.tokensServed} tok</td>
                <td>{n.rttMs === null ? '–' : `${Math.round(n.rttMs)} ms`}</td>
                <td>{n.path ?? '–'}</td>
                <td>{n.reputation.toFixed(2)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
      <section class="card">
        <h2>Credits</h2>
        <p class="muted">from {view.receipts} receipt(s) this node has seen, each signed by both sides</p>
        <table data-testid="network-balances">
          <thead>
            <tr>
              <th>peer</th>
              <th>earned</th>
              <th>spent</th>
              <th>net</th>
            </tr>
          </thead>
          <tbody>
            {view.balances.map((b) => (
              <tr key={b.peer}>
                <td>
                  {short(b.peer)}
                  {b.peer === view.self.peer && <span class="tag">this pod</span>}
                </td>
                <td>{credits(b.earned)}</td>
                <td>{credits(b.spent)}</td>
                <td>{credits(b.net)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <h3>Recent jobs</h3>
        {view.jobs.length === 0 && <p class="muted">none yet</p>}
        <ul class="jobs">
          {view.jobs.slice(0, 12).map((j, i) => (
            <li key={`${j.job}-${i}`}>
              {j.role === 'served' ? 'served' : 'sent'} {j.model} {j.role === 'served' ? 'for' : 'to'} {short(j.peer)}: {j.ok ? `${j.tokens} tokens, ${credits(j.charge)} credits` : `failed — ${j.error}`}
              {j.path && <span class="tag">{j.path}</span>}
              {j.found === 'dht' && <span class="tag">found via DHT</span>}
            </li>
          ))}
        </ul>
      </section>
    </div>
  );
}
