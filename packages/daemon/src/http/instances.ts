/**
 * Placing models: GET /api/plan (what a load would get now), GET /api/instances, POST /api/instances
 * (place, and by default wait until it serves), DELETE /api/instances/:id.
 */
import type { FastifyInstance } from 'fastify';
import { UnknownModelError } from '../models/catalog.js';
import { PlacementError } from '../serving/placement.js';
import { ServeError } from '../requests/errors.js';
import type { Serving } from '../serving/serving.js';
import { until } from '../serving/wait.js';
import type { InstanceEntry } from '../state/types.js';
import { sendError } from './errors.js';
import { createInstanceSchema, describeIssue, planQuerySchema } from './schemas.js';

/** How long POST /api/instances waits for the instance to serve. */
const READY_WAIT_MS = 120_000;

/**
 * An instance as the HTTP APIs show it (`/api/instances`, the dashboard): its placement without the
 * plan's secret or model description, and its live status.
 */
export function instanceView(serving: Serving, e: InstanceEntry) {
  const p = e.plan;
  const board = serving.board.status(e.id);
  const failed = serving.supervisor.failure(e.id) ?? serving.board.failure(e.id)?.reason ?? null;
  return {
    id: e.id,
    model: e.model,
    placedAt: e.placedAt,
    nodes: e.nodes,
    strategy: p.strategy,
    stages: p.layout.stages.map((layers, s) => ({ layers, nodes: p.ranks.slice(s * p.layout.tensor, (s + 1) * p.layout.tensor), ...(p.layout.heads ? { heads: p.layout.heads[s] } : {}) })),
    tensorParallel: p.layout.tensor,
    context: p.context,
    /** Sequences it holds at once, each with `context` tokens of KV cache (what the planner reserved). */
    sequences: p.sequences ?? 1,
    requested: p.requested,
    predicted: p.predicted,
    /** Per rank and peer: the transport its data-plane link uses ('rdma' with the device, 'tcp' with why not RDMA). */
    links: serving.board.links.of(e.id),
    status: { active: 0, queued: 0, capacity: 0, at: 0, ...(board ?? {}), ready: serving.board.isReady(e.id), failed },
  };
}

export function instanceRoutes(app: FastifyInstance, serving: Serving): void {
  const { router } = serving;
  const instances = () => serving.router.instances();

  app.get('/api/plan', async (req, reply) => {
    const q = planQuerySchema.safeParse(req.query);
    if (!q.success) return sendError(reply, 400, describeIssue(q.error).message, 'invalid_value');
    const { model, strategy, nodes, context } = q.data;
    try {
      const { plan, context: served } = await router.planFor(model, { strategy, nodes, context });
      return { model, requested: { strategy, nodes: nodes ?? null, context: context ?? null }, context: served, plan };
    } catch (err) {
      if (err instanceof UnknownModelError) return sendError(reply, 404, err.message, 'model_not_found', 'model');
      if (err instanceof PlacementError) return sendError(reply, 503, err.message, 'placement_failed');
      if (err instanceof ServeError) return sendError(reply, err.status, err.message, err.code);
      throw err;
    }
  });

  app.get('/api/instances', async () => ({ instances: Object.values(instances()).map((e) => instanceView(serving, e)) }));

  app.post('/api/instances', async (req, reply) => {
    const parsed = createInstanceSchema.safeParse(req.body ?? {});
    if (!parsed.success) {
      const { message, param } = describeIssue(parsed.error);
      return sendError(reply, 400, message, 'invalid_value', param);
    }
    const b = parsed.data;
    if (!router.offers(b.model)) return sendError(reply, 404, serving.catalog.unlisted(b.model) ?? `the model '${b.model}' does not exist in this pod`, 'model_not_found', 'model');
    const requested = { strategy: b.strategy, nodes: b.nodes, ...(b.context ? { context: b.context } : {}) };
    try {
      const deadline = Date.now() + READY_WAIT_MS;
      // The instance found or placed can be removed while we wait (a DELETE, or the coordinator replacing
      // it): then place again rather than fail the caller.
      for (let attempt = 0; ; attempt++) {
        const entry = await router.ensurePlaced(b.model, requested, { exclusive: b.strategy !== 'auto', explicit: true });
        if (!b.wait) return reply.code(201).send({ instance: instanceView(serving, entry) });
        const outcome = await until(
          router.changes,
          () => {
            if (!instances()[entry.id]) return 'removed' as const;
            const failed = serving.supervisor.failure(entry.id) ?? serving.board.failure(entry.id)?.reason;
            if (failed) return { failed };
            return serving.board.isReady(entry.id) ? ('ready' as const) : undefined;
          },
          { timeoutMs: Math.max(0, deadline - Date.now()), timeout: () => new ServeError(503, 'instance_not_ready', `instance ${entry.id} did not become ready within ${READY_WAIT_MS / 1000} s`) },
        );
        if (outcome === 'ready') return reply.code(201).send({ instance: instanceView(serving, instances()[entry.id] ?? entry) });
        if (outcome !== 'removed') return sendError(reply, 503, `instance ${entry.id} failed: ${outcome.failed}`, 'instance_failed');
        if (attempt >= 2) return sendError(reply, 503, `instance ${entry.id} was removed before it became ready`, 'instance_failed');
      }
    } catch (err) {
      if (err instanceof ServeError) return sendError(reply, err.status, err.message, err.code);
      throw err;
    }
  });

  app.delete('/api/instances/:id', async (req, reply) => {
    const id = (req.params as { id: string }).id;
    try {
      if (!(await serving.remove(id))) return sendError(reply, 404, `no instance ${id}`, 'instance_not_found');
      return reply.code(204).send();
    } catch (err) {
      if (err instanceof ServeError) return sendError(reply, err.status, err.message, err.code);
      throw err;
    }
  });
}
