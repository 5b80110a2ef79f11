/**
 * The dashboard: the page and its assets at `/` (public: they hold no data, so a browser can load them
 * before it has the token), plus the read-only views the page needs beyond the instance endpoints —
 * instances with the planner's prediction for their layout, a plan preview with the alternatives and
 * why they lost, and model download/load progress across the pod.
 */
import { buildDashboard, type DashboardBuild } from '@orchard/dashboard';
import { InfeasibleError, LinkTable, plan as planModel, predict, splitHeads, type Layout, type Plan } from '@orchard/partitioner';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { ProgressBoard } from '../dashboard/progress.js';
import { expandShortName } from '../models/curated.js';
import { engineCapabilities } from '../models/describe.js';
import { planHubModel } from '../models/hub-plan.js';
import { StoreError } from '../store/errors.js';
import { validateRepoId } from '../store/hub.js';
import { ModelFilesError } from '../models/load-check.js';
import { UnknownModelError } from '../models/catalog.js';
import { PlacementError } from '../serving/placement.js';
import { planRequestOf, servingProfile } from '../serving/profile.js';
import type { Serving } from '../serving/serving.js';
import type { ClusterView } from '../state/cluster-view.js';
import type { PlacedPlan } from '../state/placed-plan.js';
import type { ClusterState } from '../state/types.js';
import { sendError } from './errors.js';
import { instanceView } from './instances.js';

/** What the dashboard's views read besides serving (orchard.ts builds it). */
export interface DashboardSources {
  selfId: string;
  log: Logger;
  cluster(): ClusterView;
  state(): ClusterState;
  /** Download and load progress across the pod (dashboard/progress.ts). */
  progress: ProgressBoard;
}

export function dashboardRoutes(app: FastifyInstance, sources: DashboardSources, serving: Serving): void {
  const log = sources.log.child({ part: 'dashboard' });
  const { selfId, progress: board } = sources;
  let build: Promise<DashboardBuild> | null = null;
  const assets = () => {
    build ??= buildDashboard().then(
      (b) => {
        log.info({ hash: b.hash, built: b.built }, b.built ? 'dashboard built' : 'dashboard loaded from cache');
        return b;
      },
      (err: Error) => {
        build = null; // try again on the next request
        throw err;
      },
    );
    return build;
  };
  for (const path of ['/', '/dashboard/app.js', '/dashboard/app.css']) {
    app.get(path, { config: { public: true } }, async (_req, reply) => {
      let b: DashboardBuild;
      try {
        b = await assets();
      } catch (err) {
        log.error({ err: (err as Error).message }, 'dashboard build failed');
        return sendError(reply, 500, `the dashboard could not be built: ${(err as Error).message.split('\n')[0]}`, 'dashboard_build_failed');
      }
      const a = b.assets.get(path)!;
      return reply.header('content-type', a.type).header('cache-control', path === '/' ? 'no-cache' : 'public, max-age=300').send(a.body);
    });
  }

  app.get('/api/dashboard/instances', async () => {
    const cluster = sources.cluster();
    return {
      instances: Object.values(serving.router.instances()).map((e) => {
        // The /api/instances view plus layoutPredicted, keys in the same order (status last).
        const { status, ...placed } = instanceView(serving, e);
        // Forced layouts carry no prediction: ask the planner's cost model about this exact layout.
        return { ...placed, layoutPredicted: e.plan.predicted ? null : predictLayout(e.plan, cluster), status };
      }),
    };
  });

  const planQuery = z.object({ model: z.string().min(1).max(512) });
  app.get('/api/dashboard/plan', async (req, reply) => {
    const q = planQuery.safeParse(req.query);
    if (!q.success) return sendError(reply, 400, 'model is required: /api/dashboard/plan?model=<id>', 'invalid_value', 'model');
    const model = q.data.model;
    let placed;
    try {
      placed = await serving.router.planFor(model, { strategy: 'auto' });
    } catch (err) {
      if (err instanceof UnknownModelError) return sendError(reply, 404, err.message, 'model_not_found', 'model');
      if (err instanceof PlacementError) return { model, placement: null, planner: null, error: `cannot place ${model}: ${err.message}` };
      // Files that cannot load: said like a placement that cannot be made, with the reason.
      if (err instanceof ModelFilesError) return { model, placement: null, planner: null, error: err.message };
      throw err;
    }
    let planner: Plan | null = null;
    let error: string | null = null;
    try {
      planner = planModel(placed.description.spec, sources.cluster(), planRequestOf(servingProfile(placed.description, { context: placed.context })), engineCapabilities(placed.description));
    } catch (err) {
      if (!(err instanceof InfeasibleError)) throw err;
      error = `cannot place ${model}: ${err.message}`;
    }
    const { plan: pl } = placed;
    return {
      model,
      placement: { strategy: pl.strategy, layout: pl.layout, ranks: pl.ranks, predicted: pl.predicted, explanation: pl.explanation },
      contextTokens: placed.context,
      planner: planner && { strategy: planner.strategy, stages: planner.stages, predicted: planner.predicted, alternatives: planner.alternatives, explanation: planner.explanation, model: planner.model, memory: planner.memory },
      error,
    };
  });

  // What a pull would give the pod, asked before it starts: from the hub's small files and headers only.
  const hubPlanQuery = z.object({ repo: z.string().trim().min(1).max(512) });
  app.get('/api/dashboard/hub-plan', async (req, reply) => {
    const q = hubPlanQuery.safeParse(req.query);
    if (!q.success) return sendError(reply, 400, 'repo is required: /api/dashboard/hub-plan?repo=ORG/NAME[:QUANT]', 'invalid_value', 'repo');
    const repo = expandShortName(q.data.repo);
    try {
      validateRepoId(repo.split(':')[0]);
    } catch (err) {
      return sendError(reply, 400, (err as Error).message, 'invalid_value', 'repo');
    }
    const cluster = sources.cluster();
    try {
      return await planHubModel(repo, { hub: serving.hub, cluster, names: new Map(cluster.nodes.map((n) => [n.id, n.name])) });
    } catch (err) {
      if (err instanceof StoreError) return sendError(reply, 502, err.message, 'hub_failed', 'repo');
      throw err;
    }
  });

  app.get('/api/dashboard/progress', async () => {
    const instances = Object.values(serving.router.instances());
    const live = new Set(Object.values(sources.state().nodes).filter((n) => n.status === 'live').map((n) => n.peerId));
    for (const p of board.list()) {
      if (p.node !== selfId || p.phase !== 'load') continue;
      const mine = instances.filter((e) => e.model === p.model);
      if (mine.length === 0) board.forget(p.model);
      else if (mine.some((e) => serving.board.isReady(e.id))) board.ready(p.model);
    }
    const names = new Map(sources.cluster().nodes.map((n) => [n.id, n.name]));
    return { progress: board.list(live).map((p) => ({ ...p, nodeName: names.get(p.node) ?? null })) };
  });
}

/** The cost model's prediction for an instance's layout on the current pod; null when it cannot say. */
function predictLayout(p: PlacedPlan, cluster: ClusterView) {
  try {
    const known = new Set(cluster.nodes.map((n) => n.id));
    if (!p.ranks.every((r) => known.has(r))) return null;
    const T = p.layout.tensor;
    const layout: Layout = {
      stages: p.layout.stages.map((layers, s) => {
        const nodes = p.ranks.slice(s * T, (s + 1) * T);
        return { nodes, layers: [layers[0], layers[1]], heads: p.layout.heads?.[s] ?? splitHeads(p.model.dims.numHeads, nodes.map(() => 1)) };
      }),
    };
    const r = predict(p.model.spec, cluster, layout, { ...planRequestOf(servingProfile(p.model, { context: p.context })), sequences: 1 }, new LinkTable(cluster));
    return { decodeTokensPerSecond: r.decodeTokensPerSecond, prefillTokensPerSecond: r.prefillTokensPerSecond, ttftMs: r.ttftMs };
  } catch {
    return null;
  }
}
