/**
 * The pod itself: liveness, the planner's cluster JSON, everything `orchard status` shows, a stream
 * of state changes for the dashboard, and re-running this node's capability benchmark.
 */
import type { FastifyInstance } from 'fastify';
import { sseStream } from './sse.js';

/** What these routes read (the daemon's control plane, or a stand-in in tests). */
export interface PodSource {
  /** GET /api/cluster: the planner's cluster JSON plus names and mode. */
  cluster(): unknown;
  /** GET /api/status: everything `orchard status` shows (the API port is added here). */
  status(): unknown;
  /** POST /api/capability/measure: re-run the micro-benchmark. */
  remeasureCapability(): Promise<unknown>;
  /** Subscribe to state changes; returns an unsubscribe function. */
  onChange(listener: (what: string) => void): () => void;
}

export function clusterRoutes(app: FastifyInstance, pod: PodSource): void {
  app.get('/healthz', async () => ({ ok: true }));
  app.get('/api/cluster', async () => pod.cluster());
  app.get('/api/status', async (req) => {
    const status = pod.status() as { self?: object };
    const apiPort = (req.server.server.address() as { port: number } | null)?.port ?? null;
    return status.self ? { ...status, self: { ...status.self, apiPort } } : status;
  });
  app.post('/api/capability/measure', async () => pod.remeasureCapability());
  app.get('/api/events', (req, reply) => {
    const sse = sseStream(reply, 'text/event-stream');
    sse.send(pod.cluster(), 'cluster');
    const off = pod.onChange((what) => sse.send({ change: what, ...(pod.cluster() as object) }, 'cluster'));
    const keepAlive = setInterval(() => sse.comment('keep-alive'), 15_000);
    req.raw.on('close', () => {
      clearInterval(keepAlive);
      off();
    });
  });
}
