/** Running instances (which node holds which layers / tensor slices), load and unload, plan preview. */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, getJson, sendJson } from './api.js';
import { bytes, downloadLinks, downloadSources, hubPlanText, percent, rate, withNames } from './format.js';
import type { HubPlanView, InstanceView, PlanPreview, PlanStageView, ProgressView } from './types.js';

type Names = Map<string, string>;

function stateOf(i: InstanceView): { label: string; cls: string } {
  if (i.status?.failed) return { label: `failed: ${i.status.failed}`, cls: 'bad' };
  if (i.status?.ready) return { label: 'ready', cls: 'good' };
  return { label: 'loading', cls: 'warn' };
}

function Instance({ i, names, progress, onChange }: { i: InstanceView; names: Names; progress: ProgressView[]; onChange: () => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const s = stateOf(i);
  const T = i.tensorParallel;
  const predicted = i.predicted ?? i.layoutPredicted ?? null;
  const mine = progress.filter((p) => p.model === i.model && p.phase !== 'ready');
  return (
    <div class="instance" data-instance={i.id} data-model={i.model}>
      <div class="instance-head">
        <b>{i.model}</b>
        <span class="tag">{i.strategy}</span>
        <span class={`state ${s.cls}`} data-testid="instance-state">
          {s.label}
        </span>
        <span class="spacer" />
        <button
          class="danger"
          disabled={busy}
          onClick={async () => {
            setBusy(true);
            setError(null);
            try {
              await sendJson('DELETE', `/api/instances/${encodeURIComponent(i.id)}`);
              onChange();
            } catch (err) {
              setError((err as Error).message);
            } finally {
              setBusy(false);
            }
          }}
        >
          {busy ? 'unloading…' : 'Unload'}
        </button>
      </div>
      <div class="speeds">
        <span>
          predicted <b data-testid="predicted-tps">{rate(predicted?.decodeTokensPerSecond)}</b>
          {!i.predicted && i.layoutPredicted ? <small> (planner's estimate for this layout)</small> : null}
        </span>
        <span>
          measured <b data-testid="measured-tps">{rate(i.status?.decodeTokensPerSecond)}</b>
        </span>
        {i.context ? (
          <span data-testid="instance-context">
            context <b>{i.context.toLocaleString('en-US')}</b> tokens
          </span>
        ) : null}
        {i.status && (
          <span class="muted">
            {i.status.active} running · {i.status.queued} queued
          </span>
        )}
      </div>
      <table class="ranks">
        <thead>
          <tr>
            <th>stage</th>
            <th>layers</th>
            <th>node</th>
            <th>slice</th>
          </tr>
        </thead>
        <tbody>
          {i.stages.flatMap((st, si) =>
            st.nodes.map((n, t) => (
              <tr key={`${si}-${t}`} data-placement-node={names.get(n) ?? n}>
                <td>{si + 1}</td>
                <td>
                  {st.layers[0]}–{st.layers[1] - 1}
                </td>
                <td>{names.get(n) ?? <span title={n}>{n.slice(-8)} (gone)</span>}</td>
                <td>{T > 1 ? `tensor ${t + 1}/${T}` : 'whole layers'}</td>
              </tr>
            )),
          )}
        </tbody>
      </table>
      {mine.map((p) => (
        <ProgressBar key={`${p.node}|${p.model}`} p={p} names={names} />
      ))}
      {error && <p class="error">{error}</p>}
    </div>
  );
}

function ProgressBar({ p, names }: { p: ProgressView; names: Names }) {
  const frac = p.total > 0 ? Math.min(1, p.done / p.total) : 0;
  return (
    <div class="progress" data-testid="progress">
      <span>
        {names.get(p.node) ?? p.node.slice(-8)}: {p.phase === 'download' ? `downloading ${p.file ?? ''}` : p.phase === 'load' ? 'loading weights' : p.phase}{' '}
        {p.phase === 'download' ? `${bytes(p.done)} / ${bytes(p.total)} (${percent(p.done, p.total)})` : ''}
        {p.message ? ` — ${p.message}` : ''}
      </span>
      <div class="bar">
        <div style={{ width: `${p.phase === 'load' ? 100 : frac * 100}%` }} class={p.phase === 'load' ? 'indeterminate' : ''} />
      </div>
      {p.sources && Object.keys(p.sources).length > 0 && <small data-testid="progress-sources">from {downloadSources(p.sources, names)}</small>}
      {p.phase === 'download' && p.links?.length ? <small data-testid="progress-links">links: {downloadLinks(p.links, names)}</small> : null}
      {p.badPeers?.map((b) => (
        <small key={b} class="error">
          dropped {names.get(b) ?? b.slice(-8)}: it served bytes that do not match the pod digest
        </small>
      ))}
    </div>
  );
}

function StageList({ stages, names }: { stages: PlanStageView[]; names: Names }) {
  return (
    <span>
      {stages.map((s, i) => (
        <span key={i} class="stage">
          layers {s.layers[0]}–{s.layers[1] - 1} on {s.nodes.map((n) => names.get(n) ?? n.slice(-6)).join(' + ')}
          {s.tensorParallel > 1 ? ` (tensor ×${s.tensorParallel})` : ''}
        </span>
      ))}
    </span>
  );
}

function Preview({ models, names }: { models: string[]; names: Names }) {
  // Plan again when the pod changes (a node joined or left).
  const pod = [...names.keys()].sort().join();
  const [model, setModel] = useState('');
  const [preview, setPreview] = useState<PlanPreview | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!model && models.length) setModel(models[0]);
  }, [models, model]);
  useEffect(() => {
    if (!model) return;
    let live = true;
    const load = () =>
      getJson<PlanPreview>(`/api/dashboard/plan?model=${encodeURIComponent(model)}`).then(
        (p) => live && (setPreview(p), setError(null)),
        (err: Error) => live && setError(err.message),
      );
    void load();
    const t = setInterval(load, 5000);
    return () => {
      live = false;
      clearInterval(t);
    };
  }, [model, pod]);
  const pl = preview?.planner;
  return (
    <div class="preview" data-testid="plan-preview">
      <h3>
        Plan preview{' '}
        <select value={model} onChange={(e) => setModel((e.target as HTMLSelectElement).value)}>
          {models.map((m) => (
            <option key={m}>{m}</option>
          ))}
        </select>
      </h3>
      {error && <p class="error">{error}</p>}
      {preview?.error && <p class="error" data-testid="plan-error">{preview.error}</p>}
      {pl && (
        <>
          <p>
            <b>{pl.strategy}</b> <StageList stages={pl.stages} names={names} /> — predicted <b>{rate(pl.predicted.decodeTokensPerSecond)}</b>, first token in {Math.round(pl.predicted.ttftMs)} ms; weights {bytes(pl.model.weightsBytes)}
            {preview.contextTokens ? <span data-testid="preview-context">; context {preview.contextTokens.toLocaleString('en-US')} tokens</span> : null}
          </p>
          {preview.placement && preview.placement.strategy !== pl.strategy && <p class="muted">The engine runs this as {preview.placement.strategy}: {withNames(preview.placement.explanation.at(-1) ?? '', names)}</p>}
          <ul class="explain">
            {pl.explanation.map((e, k) => (
              <li key={k}>{withNames(e, names)}</li>
            ))}
          </ul>
          {pl.alternatives.length > 0 && (
            <table class="alternatives" data-testid="alternatives">
              <thead>
                <tr>
                  <th>alternative</th>
                  <th>predicted</th>
                  <th>why it lost</th>
                </tr>
              </thead>
              <tbody>
                {pl.alternatives.map((a, k) => (
                  <tr key={k}>
                    <td>
                      {a.strategy} {a.nodes.length ? `on ${a.nodes.map((n) => names.get(n) ?? n.slice(-6)).join(', ')}` : ''}
                    </td>
                    <td>{rate(a.predicted?.decodeTokensPerSecond)}</td>
                    <td>{withNames(a.rejected, names)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
    </div>
  );
}

function LoadForm({ models, onChange }: { models: string[]; onChange: () => void }) {
  const [model, setModel] = useState('');
  const [strategy, setStrategy] = useState('auto');
  const [nodes, setNodes] = useState(2);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!model && models.length) setModel(models[0]);
  }, [models, model]);
  return (
    <form
      class="load-form"
      onSubmit={async (e) => {
        e.preventDefault();
        setBusy(true);
        setError(null);
        try {
          await sendJson('POST', '/api/instances', { model, strategy, ...(strategy === 'auto' ? {} : { nodes }) });
          onChange();
        } catch (err) {
          setError(err instanceof ApiError ? err.message : String(err));
        } finally {
          setBusy(false);
        }
      }}
    >
      <select name="model" value={model} onChange={(e) => setModel((e.target as HTMLSelectElement).value)}>
        {models.length === 0 && <option value="">no models in the pod</option>}
        {models.map((m) => (
          <option key={m}>{m}</option>
        ))}
      </select>
      <select name="strategy" value={strategy} onChange={(e) => setStrategy((e.target as HTMLSelectElement).value)}>
        <option value="auto">auto (planner)</option>
        <option value="pipeline">pipeline</option>
        <option value="tensor">tensor</option>
      </select>
      {strategy !== 'auto' && (
        <label>
          over <input name="nodes" type="number" min={1} max={64} value={nodes} onInput={(e) => setNodes(Number((e.target as HTMLInputElement).value))} /> nodes
        </label>
      )}
      <button type="submit" disabled={busy || !model}>
        {busy ? 'placing…' : 'Load'}
      </button>
      {error && (
        <p class="error" data-testid="load-error">
          {error}
        </p>
      )}
    </form>
  );
}

/**
 * Download: the pod's plan for the model comes first (from the hub's small files and headers, no
 * weights): a model that loads and fits is pulled at once with its plan shown; one that does not fit
 * waits for a second press ("Download anyway"); one the engine cannot load is not pulled.
 */
function PullForm({ names, onChange }: { names: Names; onChange: () => void }) {
  const [repo, setRepo] = useState('');
  const [busy, setBusy] = useState<string | null>(null);
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);
  const [plan, setPlan] = useState<HubPlanView | null>(null);
  /** The repo whose "does not fit" plan was shown: the next press pulls it anyway. */
  const [confirmed, setConfirmed] = useState<string | null>(null);
  const shown = plan && hubPlanText(plan, names);
  return (
    <form
      class="pull-form"
      onSubmit={async (e) => {
        e.preventDefault();
        const r = repo.trim();
        if (!r) return;
        setBusy(r);
        setResult(null);
        try {
          if (confirmed !== r) {
            setPlan(null);
            const p = await getJson<HubPlanView>(`/api/dashboard/hub-plan?repo=${encodeURIComponent(r)}`);
            setPlan(p);
            if (!p.loadable) return;
            if (!p.fits) return void setConfirmed(r);
          }
          setConfirmed(null);
          const out = await sendJson<{ repo: string; hubBytes: number; peerBytes: number; peersHolding: string[] }>('POST', '/api/models/pull', { repo: r });
          // A short name comes back as the hub repo it stands for (the daemon expands it as the CLI does).
          setResult({ ok: true, text: `${out?.repo ?? r} is on this node: ${bytes(out?.hubBytes ?? 0)} from the hub, ${bytes(out?.peerBytes ?? 0)} from peers` });
          setRepo('');
          onChange();
        } catch (err) {
          setResult({ ok: false, text: (err as Error).message });
        } finally {
          setBusy(null);
        }
      }}
    >
      <input
        name="repo"
        placeholder="download a model: org/name or a short name (qwen2.5-0.5b)"
        value={repo}
        onInput={(e) => {
          setRepo((e.target as HTMLInputElement).value);
          setConfirmed(null);
        }}
      />
      <button type="submit" disabled={!!busy || !repo.trim()}>
        {busy ? (plan || confirmed === busy ? 'downloading…' : 'planning…') : confirmed && confirmed === repo.trim() ? 'Download anyway' : 'Download'}
      </button>
      {shown && plan && (
        <div class={plan.loadable && plan.fits ? 'muted' : 'error'} data-testid="pull-plan" data-fits={String(plan.fits)} data-loadable={String(plan.loadable)}>
          <p data-testid="pull-plan-verdict">{shown.verdict}</p>
          {shown.nodes.length > 0 && (
            <ul>
              {shown.nodes.map((line, i) => (
                <li key={plan.nodes[i].node} data-testid="pull-plan-node" data-node={plan.nodes[i].name ?? plan.nodes[i].node}>
                  {line}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      {result && (
        <p class={result.ok ? 'muted' : 'error'} data-testid="pull-result">
          {result.text}
        </p>
      )}
    </form>
  );
}

export function Placement({ instances, models, names, progress, onChange }: { instances: InstanceView[]; models: string[]; names: Names; progress: ProgressView[]; onChange: () => void }) {
  const placed = new Set(instances.map((i) => i.model));
  const loose = progress.filter((p) => !placed.has(p.model) && (p.phase === 'download' || p.phase === 'failed'));
  return (
    <div class="placement">
      <LoadForm models={models} onChange={onChange} />
      {instances.length === 0 && (
        <p class="muted" data-testid="no-instance">
          {models.length
            ? `No model is loaded yet: ${models.length === 1 ? models[0] : 'a model'} loads on its first chat request (a few seconds), or press Load now.`
            : 'No model here yet: download one below, or run `orchard pull ORG/NAME`.'}
        </p>
      )}
      {instances.map((i) => (
        <Instance key={i.id} i={i} names={names} progress={progress} onChange={onChange} />
      ))}
      {loose.map((p) => (
        <ProgressBar key={`${p.node}|${p.model}`} p={p} names={names} />
      ))}
      <PullForm names={names} onChange={onChange} />
      <Preview models={models} names={names} />
    </div>
  );
}
