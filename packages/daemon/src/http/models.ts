/** Models on disk: POST /api/models/pull brings one into this node's store, asking the pod's peers for the bytes before the hub (`fromPod`: peers only). */
import type { FastifyInstance } from 'fastify';
import { expandShortName } from '../models/curated.js';
import type { Serving } from '../serving/serving.js';
import { DiskError, ModelRefusedError, StoreError } from '../store/errors.js';
import { sendError } from './errors.js';
import { describeIssue, pullBodySchema } from './schemas.js';

export function modelRoutes(app: FastifyInstance, serving: Serving): void {
  app.post('/api/models/pull', async (req, reply) => {
    // The same names as `orchard pull`: a catalog short name ("qwen2.5-0.5b") stands for its hub repo.
    const body = (req.body ?? {}) as { repo?: unknown };
    const given = typeof body.repo === 'string' ? { ...body, repo: expandShortName(body.repo.trim()) } : body;
    const b = pullBodySchema.safeParse(given);
    if (!b.success) {
      const { message, param } = describeIssue(b.error);
      return sendError(reply, 400, message, 'invalid_value', param);
    }
    try {
      const r = await serving.pull(b.data.repo, undefined, { fromPod: b.data.fromPod });
      return { repo: b.data.repo, dir: r.dir, commit: r.commit, sources: r.sources, hubBytes: r.hubBytes, peerBytes: r.peerBytes, bySource: r.bySource, badPeers: r.badPeers, peersHolding: r.holders };
    } catch (err) {
      // The disk here, not the hub: 507 (full, read-only, not ours to write), the path and the fix in the message.
      if (err instanceof DiskError) return sendError(reply, 507, err.message, err.code === 'ENOSPC' || err.code === 'EDQUOT' ? 'insufficient_storage' : 'storage_not_writable');
      // The engine's check refused the model from its small files: the request names a model it cannot run.
      if (err instanceof ModelRefusedError) return sendError(reply, 422, err.message, 'model_not_loadable');
      if (err instanceof StoreError) return sendError(reply, 502, err.message, 'pull_failed');
      throw err;
    }
  });
}
