/**
 * The control channel of RDMA connection setup (the {lid, qpn, psn, gid} rounds), carried over the instance's
 * TCP group. That group was authenticated with the secret and endpoints the daemons' control plane handed
 * out, it connects exactly the ranks that must talk, and it exists anyway as every link's fallback — so the
 * rounds need no relay through the daemons (see docs/rdma.md, "Connection setup in the daemon").
 *
 * Each round is one length-prefixed JSON message each way; rounds with one peer run one at a time so their
 * frames never interleave, and every wait is bounded and names the peer.
 */
import type { Group, rdma } from './transport.js';

/** A round carries a handful of numbers and a GID; anything bigger is a protocol error. */
export const MAX_ROUND_BYTES = 64 * 1024;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

export function groupControlChannel(group: Group, options: { timeoutMs: number }): rdma.ControlChannel {
  const chains = new Map<number, Promise<unknown>>();
  return {
    exchange(peer, round, value) {
      const previous = chains.get(peer) ?? Promise.resolve();
      const next = previous.catch(() => undefined).then(() => exchangeOnce(group, peer, round, value, options.timeoutMs));
      chains.set(peer, next);
      return next;
    },
  };
}

async function exchangeOnce(group: Group, peer: number, round: string, value: unknown, timeoutMs: number): Promise<unknown> {
  const what = `RDMA setup with rank ${peer} (round ${round})`;
  const payload = encoder.encode(JSON.stringify({ round, value }));
  if (payload.length > MAX_ROUND_BYTES) throw new Error(`${what}: message of ${payload.length} bytes exceeds ${MAX_ROUND_BYTES}`);
  const header = new Uint8Array(4);
  new DataView(header.buffer).setUint32(0, payload.length);
  const incoming = new Uint8Array(4);
  try {
    // Both ends send before receiving; TCP buffers the few bytes, so neither waits on the other's recv.
    await group.send(peer, header, { timeoutMs });
    await group.send(peer, payload, { timeoutMs });
    await group.recv(peer, incoming, { timeoutMs });
  } catch (err) {
    throw new Error(`${what}: ${(err as Error).message}`);
  }
  const length = new DataView(incoming.buffer).getUint32(0);
  if (length === 0 || length > MAX_ROUND_BYTES) throw new Error(`${what}: rank ${peer} announced a ${length}-byte message`);
  const body = new Uint8Array(length);
  try {
    await group.recv(peer, body, { timeoutMs });
  } catch (err) {
    throw new Error(`${what}: ${(err as Error).message}`);
  }
  let parsed: { round?: unknown; value?: unknown };
  try {
    parsed = JSON.parse(decoder.decode(body)) as typeof parsed;
  } catch {
    throw new Error(`${what}: rank ${peer} sent a message that is not JSON`);
  }
  if (parsed?.round !== round) throw new Error(`${what}: rank ${peer} answered round ${String(parsed?.round)} (setup out of step)`);
  return parsed.value;
}
