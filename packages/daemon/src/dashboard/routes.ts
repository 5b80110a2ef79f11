/**
 * The dashboard on the daemon's API: the page and its assets at `/` (public: they hold no data, so a
 * browser can load them before it has the token), plus the read-only views the page needs beyond the
 * OpenAI/instance endpoints — instances with the planner's prediction for their layout, a plan preview
 * with the alternatives and why they lost, and model download/load progress across the pod.
 */
import { buildDashboard, type DashboardBuild } from '@orchard/dashboard';
import { InfeasibleError, LinkTable, modelFromConfig, plan as planModel, predict, splitHeads, type Layout, type Plan } from '@orchard/partitioner';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Daemon } from '../daemon.js';
import type { InstanceManager, PlacedPlan } from '../instances/manager.js';
import { UnknownModelError } from '../instances/models.js';
import { publicInstance } from '../instances/public-instance.js';
import { PlacementError } from '../placement/place.js';
import { sendError } from '../openai/errors.js';
import { servingContext } from '../serving-context.js';
import { encodeProgress, PROGRESS_TOPIC, ProgressBoard } from './progress.js';

/** The context an instance of a model with this config.json serves (what the chat can hold). */
function contextOf(config: unknown): number | null {
  const m = Number((config as { max_position_embeddings?: unknown } | null)?.max_position_embeddings);
  return Number.isFinite(m) && m > 0 ? servingContext(m) : null;
}

/** The planner request placement uses (placement/place.ts), so previews predict what a load would get. */
const PLAN_REQUEST = { contextTokens: 2048, promptTokens: 256 };

export interface DashboardHandle {
  progress: ProgressBoard;
  /** Adds the routes that need the serving side (call once installServing has run). */
  attach(manager: InstanceManager): Promise<void>;
}

/** Registers the page (built on first request, cached on disk) and the progress gossip. */
export async function installDashboard(app: FastifyInstance, daemon: Daemon): Promise<DashboardHandle> {
  const log = daemon.log.child({ part: 'dashboard' });
  const selfId = daemon.node.peerId.toString();
  const pubsub = daemon.node.services.pubsub;
  const board = new ProgressBoard({
    self: selfId,
    publish: (p) => void pubsub.publish(PROGRESS_TOPIC, encodeProgress(p)).catch((err: Error) => log.debug({ err: err.message }, 'progress publish failed')),
  });
  pubsub.subscribe(PROGRESS_TOPIC);
  pubsub.addEventListener('message', (evt) => {
    const msg = evt.detail;
    if (msg.topic !== PROGRESS_TOPIC || msg.type !== 'signed') return;
    if (!board.receive(msg.data, msg.from.toString())) log.debug({ peer: msg.from.toString() }, 'dropped progress message');
  });
  const beat = setInterval(() => board.heartbeat(), 3000);
  app.addHook('onClose', async () => clearInterval(beat));

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

  return {
    progress: board,
    attach: async (manager) => {
      const names = () => new Map(daemon.cluster().nodes.map((n) => [n.id, n.name]));

      app.get('/api/dashboard/instances', async () => {
        const cluster = daemon.cluster();
        return {
          instances: Object.values(manager.instances()).map((e) => {
            const p = e.plan as PlacedPlan;
            // The /v1/instances view plus layoutPredicted, keys in the same order (status last).
            const { status, ...placed } = publicInstance(manager, e);
            return {
              ...placed,
              // Forced layouts carry no prediction: ask the planner's cost model about this exact layout.
              layoutPredicted: p.predicted ? null : predictLayout(p, e.model, cluster),
              contextTokens: contextOf(p.config),
              status,
            };
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
          placed = manager.planFor(model, { strategy: 'auto' });
        } catch (err) {
          if (err instanceof UnknownModelError) return sendError(reply, 404, err.message, 'model_not_found', 'model');
          if (err instanceof PlacementError) return { model, placement: null, planner: null, error: `cannot place ${model}: ${err.message}` };
          throw err;
        }
        let planner: Plan | null = null;
        let error: string | null = null;
        try {
          planner = planModel(modelFromConfig(placed.config, { name: model }), daemon.cluster(), PLAN_REQUEST);
        } catch (err) {
          if (!(err instanceof InfeasibleError)) throw err;
          error = `cannot place ${model}: ${err.message}`;
        }
        const { plan: pl } = placed;
        return {
          model,
          placement: { strategy: pl.strategy, layout: pl.layout, ranks: pl.ranks, predicted: pl.predicted, explanation: pl.explanation },
          contextTokens: contextOf(placed.config),
          planner: planner && { strategy: planner.strategy, stages: planner.stages, predicted: planner.predicted, alternatives: planner.alternatives, explanation: planner.explanation, model: planner.model, memory: planner.memory },
          error,
        };
      });

      app.get('/api/dashboard/progress', async () => {
        const instances = Object.values(manager.instances());
        const live = new Set(Object.values(daemon.replica.state.nodes).filter((n) => n.status === 'live').map((n) => n.peerId));
        for (const p of board.list()) {
          if (p.node !== selfId || p.phase !== 'load') continue;
          const mine = instances.filter((e) => e.model === p.model);
          if (mine.length === 0) board.forget(p.model);
          else if (mine.some((e) => manager.isReady(e.id))) board.ready(p.model);
        }
        const n = names();
        return { progress: board.list(live).map((p) => ({ ...p, nodeName: n.get(p.node) ?? null })) };
      });
    },
  };
}

/** The cost model's prediction for an instance's layout on the current pod; null when it cannot say. */
function predictLayout(p: PlacedPlan, model: string, cluster: ReturnType<Daemon['cluster']>) {
  try {
    const spec = modelFromConfig(p.config, { name: model });
    const known = new Set(cluster.nodes.map((n) => n.id));
    if (!p.ranks.every((r) => known.has(r))) return null;
    const T = p.layout.tensor;
    const layout: Layout = {
      stages: p.layout.stages.map((layers, s) => {
        const nodes = p.ranks.slice(s * T, (s + 1) * T);
        return { nodes, layers: [layers[0], layers[1]], heads: splitHeads(p.shape.numHeads, nodes.map(() => 1)) };
      }),
    };
    const r = predict(spec, cluster, layout, { ...PLAN_REQUEST, sequences: 1 }, new LinkTable(cluster));
    return { decodeTokensPerSecond: r.decodeTokensPerSecond, prefillTokensPerSecond: r.prefillTokensPerSecond, ttftMs: r.ttftMs };
  } catch {
    return null;
  }
}
