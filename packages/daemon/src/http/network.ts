/**
 * The wide-area network (network/): GET /api/network (this node's view: nodes and pods seen, offers,
 * balances from receipts, recent jobs, lending), GET|PUT /api/network/lending (the owner's policy;
 * `orchard lend` and the dashboard's switch). A node that joined no network answers 404 with how to.
 * GET /api/network/joined answers 200 either way, so the dashboard asks it first instead of drawing a
 * 404 in the browser's console every few seconds on a node that joined nothing.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import { lendingPolicySchema } from '../network/lending.js';
import type { NetworkService } from '../network/service.js';
import { issueText } from '../network/signed.js';
import { sendError } from './errors.js';

const NOT_JOINED = 'this node has not joined a network (start it with --network NAME --network-bootstrap MULTIADDR)';
const notJoined = (reply: FastifyReply) => sendError(reply, 404, NOT_JOINED, 'not_in_network');

export function networkRoutes(app: FastifyInstance, network: NetworkService | null): void {
  app.get('/api/network', async (_req, reply) => (network ? network.status() : notJoined(reply)));

  app.get('/api/network/joined', async () => (network ? { joined: true } : { joined: false, message: NOT_JOINED }));

  app.get('/api/network/lending', async (_req, reply) => (network ? network.lending : notJoined(reply)));

  // A partial policy: what it names changes, the rest stays.
  app.put('/api/network/lending', async (req, reply) => {
    if (!network) return notJoined(reply);
    if (req.body === null || typeof req.body !== 'object' || Array.isArray(req.body)) return sendError(reply, 400, 'the body must be a JSON object (fields of the lending policy)', 'invalid_body');
    const parsed = lendingPolicySchema.safeParse({ ...network.lending, ...(req.body as object) });
    if (!parsed.success) return sendError(reply, 400, `lending policy: ${issueText(parsed.error)}`, 'invalid_value');
    network.setLending(parsed.data);
    return network.lending;
  });
}
