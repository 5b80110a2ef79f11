/** The Orchard dashboard: the pod (topology, placement with plan preview and load/unload, chat) and the network page. */
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError, getJson, getToken, onUnauthorized, setToken, streamSse } from './api.js';
import { Chat } from './chat.js';
import { Network } from './network.js';
import { Placement } from './placement.js';
import { Topology } from './topology.js';
import type { ClusterView, InstanceView, ProgressView } from './types.js';

type Conn = 'connecting' | 'live' | 'offline' | 'token';

function TokenPrompt({ onSubmit, wrong }: { onSubmit: (t: string) => void; wrong: boolean }) {
  const [value, setValue] = useState('');
  return (
    <div class="overlay" data-testid="token-prompt">
      <form
        class="card token"
        onSubmit={(e) => {
          e.preventDefault();
          if (value.trim()) onSubmit(value.trim());
        }}
      >
        <h2>API token needed</h2>
        <p>This daemon's API is protected. Enter the token it was started with (<code>--api-token</code> or <code>ORCHARD_API_TOKEN</code>).</p>
        {wrong && <p class="error">That token was not accepted.</p>}
        <input type="password" name="token" autoFocus placeholder="token" value={value} onInput={(e) => setValue((e.target as HTMLInputElement).value)} />
        <button type="submit">Connect</button>
      </form>
    </div>
  );
}

function App() {
  const [cluster, setCluster] = useState<ClusterView | null>(null);
  const [instances, setInstances] = useState<InstanceView[]>([]);
  const [models, setModels] = useState<string[]>([]);
  const [progress, setProgress] = useState<ProgressView[]>([]);
  const [conn, setConn] = useState<Conn>('connecting');
  const [triedToken, setTriedToken] = useState(false);
  const [epoch, setEpoch] = useState(0);
  const [page, setPage] = useState<'pod' | 'network'>(location.hash === '#network' ? 'network' : 'pod');
  const go = (p: 'pod' | 'network') => {
    setPage(p);
    history.replaceState(null, '', p === 'network' ? '#network' : '#');
  };

  useEffect(() => onUnauthorized(() => setConn('token')), []);

  // Live cluster: GET /api/events (fetch streaming so the Authorization header goes along), reconnecting.
  useEffect(() => {
    const abort = new AbortController();
    let stopped = false;
    (async () => {
      let delay = 500;
      while (!stopped) {
        try {
          setConn((c) => (c === 'token' ? c : 'connecting'));
          await streamSse('/api/events', { signal: abort.signal }, (e) => {
            if (e.event !== 'cluster') return;
            setCluster(JSON.parse(e.data) as ClusterView);
            setConn('live');
            delay = 500;
          });
        } catch (err) {
          if (stopped) return;
          if (err instanceof ApiError && err.status === 401) return;
        }
        if (stopped) return;
        setConn((c) => (c === 'token' ? c : 'offline'));
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, 5000);
      }
    })();
    return () => {
      stopped = true;
      abort.abort();
    };
  }, [epoch]);

  const refresh = useCallback(async () => {
    try {
      const [i, m, p] = await Promise.all([
        getJson<{ instances: InstanceView[] }>('/api/dashboard/instances'),
        getJson<{ data: { id: string }[] }>('/v1/models'),
        getJson<{ progress: ProgressView[] }>('/api/dashboard/progress'),
      ]);
      setInstances(i.instances);
      setModels(m.data.map((x) => x.id));
      setProgress(p.progress);
    } catch {
      /* shown through the connection state */
    }
  }, []);

  useEffect(() => {
    if (conn === 'token') return;
    void refresh();
    const t = setInterval(refresh, 1500);
    return () => clearInterval(t);
  }, [conn, epoch, refresh, cluster?.change]);

  const names = new Map((cluster?.nodes ?? []).map((n) => [n.id, n.name]));
  return (
    <>
      <header>
        <h1>Orchard</h1>
        <nav class="tabs">
          <button class={page === 'pod' ? 'active' : ''} onClick={() => go('pod')} data-testid="tab-pod">
            Pod
          </button>
          <button class={page === 'network' ? 'active' : ''} onClick={() => go('network')} data-testid="tab-network">
            Network
          </button>
        </nav>
        <span class={`badge conn-${conn}`} data-testid="connection">
          {conn === 'live' ? 'live' : conn === 'token' ? 'token needed' : conn}
        </span>
        {cluster && (
          <span class="meta">
            {cluster.nodes.length} node{cluster.nodes.length === 1 ? '' : 's'} · {cluster.mode} pod · coordinator {names.get(cluster.coordinator ?? '') ?? '–'}
          </span>
        )}
        {getToken() && (
          <button
            class="link"
            onClick={() => {
              setToken(null);
              setConn('token');
            }}
          >
            forget token
          </button>
        )}
      </header>
      {page === 'network' && conn !== 'token' && <Network />}
      <main hidden={page !== 'pod'}>
        <section class="card topo-card">
          <h2>Topology</h2>
          {cluster ? <Topology cluster={cluster} instances={instances} /> : <p class="muted">waiting for the daemon…</p>}
        </section>
        <section class="card">
          <h2>Placement</h2>
          <Placement instances={instances} models={models} names={names} progress={progress} onChange={refresh} />
        </section>
        <section class="card chat-card">
          <h2>Chat</h2>
          <Chat models={models} instances={instances} />
        </section>
      </main>
      {conn === 'token' && (
        <TokenPrompt
          wrong={triedToken}
          onSubmit={(t) => {
            setToken(t);
            setTriedToken(true);
            setConn('connecting');
            setEpoch((e) => e + 1);
          }}
        />
      )}
    </>
  );
}

render(<App />, document.getElementById('app')!);
