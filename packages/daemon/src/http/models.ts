/** Models on disk: POST /api/models/pull brings one into this node's store, asking the pod's peers for the bytes before the hub (`fromPod`: peers only). */
import type { FastifyInstance } from 'fastify';
import type { Serving } from '../serving/serving.js';
import { ModelRefusedError, StoreError } from '../store/errors.js';
import { sendError } from './errors.js';
import { describeIssue, pullBodySchema } from './schemas.js';

export function modelRoutes(app: FastifyInstance, serving: Serving): void {
  app.post('/api/models/pull', async (req, reply) => {
    const b = pullBodySchema.safeParse(req.body ?? {});
    if (!b.success) {
      const { message, param } = describeIssue(b.error);
      return sendError(reply, 400, message, 'invalid_value', param);
    }
    try {
      const r = await serving.pull(b.data.repo, undefined, { fromPod: b.data.fromPod });
      return { repo: b.data.repo, dir: r.dir, commit: r.commit, sources: r.sources, hubBytes: r.hubBytes, peerBytes: r.peerBytes, bySource: r.bySource, badPeers: r.badPeers, peersHolding: r.holders };
    } catch (err) {
      // The engine's check refused the model from its small files: the request names a model it cannot run.
      if (err instanceof ModelRefusedError) return sendError(reply, 422, err.message, 'model_not_loadable');
      if (err instanceof StoreError) return sendError(reply, 502, err.message, 'pull_failed');
      throw err;
    }
  });
}
