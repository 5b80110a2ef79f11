/**
 * A runner's data-plane group: TCP between every pair of ranks first (authenticated with the instance's
 * secret), then RDMA on each link where both ends have it and queue-pair setup succeeds; a link where it
 * does not stays on TCP, with the reason kept and logged.
 *
 * Every rank must run the same collective schedules, so the choice of `Group` is made for the whole
 * instance: the TCP group as it is when no link anywhere is RDMA (exactly today's data plane), otherwise the
 * RDMA mesh group over the mixed links. Without verbs on at least two ranks the per-link rounds are skipped:
 * the only cost over plain TCP is one one-byte all-gather.
 */
import { createRdmaGroup, createTcpGroup, linkOverGroup, type CipherName, type Group, type LinkChoice, type TcpListener, type TcpPeer } from './transport.js';
import { groupControlChannel } from './control-channel.js';
import { DEFAULT_SECURITY, describeEncryption, encryptionPolicy, type DataPlaneSecurity } from './link-security.js';
import type { RdmaSelection } from './rdma-select.js';

export interface DataPlaneOptions {
  rank: number;
  peers: TcpPeer[];
  groupId: string;
  secret: Uint8Array;
  listener: TcpListener;
  /** Bound on connecting the TCP group. */
  connectTimeoutMs: number;
  /** Bound on each RDMA setup round (the peer is named when it runs out). @default 10 s */
  setupTimeoutMs?: number;
  rdma: RdmaSelection;
  /** Which TCP connections to encrypt. @default every one that leaves the machine */
  security?: DataPlaneSecurity;
  log?: (line: string) => void;
}

/** A link as chosen, with `encryption` on TCP links: the cipher, or null when plain. */
export type DataPlaneLink = LinkChoice & { encryption?: CipherName | null };

export interface DataPlane {
  group: Group;
  /** One entry per peer: the transport its link uses and why (device name for RDMA), and a TCP link's cipher. */
  links: DataPlaneLink[];
  /** One line for logs and status, e.g. "all links TCP (no RDMA devices)". */
  summary: string;
}

/**
 * The runner's steps always pass their own timeouts (step timeout, or an idle wait for the next header), and
 * an RDMA link caps each operation's timeout at its watchdog's: so the watchdog must not be shorter than the
 * idle wait, and a stall is still caught by each step's own timeout.
 */
const LINK_WATCHDOG_MS = 2 ** 31 - 1;

async function allFlags(tcp: Group, flag: boolean, timeoutMs: number, what: string): Promise<Uint8Array> {
  const out = new Uint8Array(tcp.size);
  try {
    await tcp.allGather(Uint8Array.of(flag ? 1 : 0), out, { timeoutMs });
  } catch (err) {
    throw new Error(`data plane setup (${what}): ${(err as Error).message}`);
  }
  return out;
}

function tcpLinks(rank: number, size: number, reasonFor: (peer: number) => string): LinkChoice[] {
  return [...Array(size).keys()].filter((p) => p !== rank).map((peer) => ({ peer, transport: 'tcp' as const, reason: reasonFor(peer) }));
}

/** The links with each TCP link's cipher (null: plain) attached, as the daemon reports them. */
function withEncryption(links: LinkChoice[], encryption: readonly (CipherName | null)[]): DataPlaneLink[] {
  return links.map((l) => (l.transport === 'rdma' ? l : { ...l, encryption: encryption[l.peer] ?? null }));
}

/** The link summary plus how the TCP links are protected. */
function summarize(links: LinkChoice[], encryption: readonly (CipherName | null)[]): string {
  const tcpPeers = links.filter((l) => l.transport === 'tcp').map((l) => l.peer);
  const protection = describeEncryption(encryption, tcpPeers);
  return protection ? `${summarizeTransports(links)}; TCP ${protection}` : summarizeTransports(links);
}

function summarizeTransports(links: LinkChoice[]): string {
  if (links.length === 0) return 'one rank: no links';
  const rdmaLinks = links.filter((l) => l.transport === 'rdma');
  if (rdmaLinks.length === 0) {
    const reasons = [...new Set(links.map((l) => l.reason))];
    return `all links TCP (${reasons.length === 1 ? reasons[0] : reasons.join('; ')})`;
  }
  return links.map((l) => `rank ${l.peer}: ${l.transport === 'rdma' ? `RDMA on ${l.reason}` : `TCP (${l.reason})`}`).join(', ');
}

export async function createDataPlane(o: DataPlaneOptions): Promise<DataPlane> {
  const log = o.log ?? (() => {});
  const setupTimeoutMs = o.setupTimeoutMs ?? 10_000;
  const tcp = await createTcpGroup({
    rank: o.rank,
    peers: o.peers,
    groupId: o.groupId,
    secret: o.secret,
    listener: o.listener,
    connectTimeoutMs: o.connectTimeoutMs,
    encrypt: encryptionPolicy(o.security ?? DEFAULT_SECURITY),
  });
  try {
    const size = tcp.size;
    const withVerbs = await allFlags(tcp, !!o.rdma.verbs, setupTimeoutMs, 'which ranks have RDMA');
    if (withVerbs.filter((f) => f === 1).length < 2) {
      const links = tcpLinks(o.rank, size, (p) => (o.rdma.verbs ? `rank ${p} has no RDMA (no addon, verbs library or device)` : `RDMA unavailable: ${o.rdma.reason}`));
      const summary = summarize(links, tcp.encryption);
      log(`data plane: ${summary}`);
      return { group: tcp, links: withEncryption(links, tcp.encryption), summary };
    }
    const made = await createRdmaGroup({
      rank: o.rank,
      size,
      verbs: o.rdma.verbs,
      noVerbsReason: o.rdma.verbs ? undefined : `RDMA unavailable: ${o.rdma.reason}`,
      deviceFor: (p) => o.rdma.deviceFor(p),
      noDeviceReason: (p) => o.rdma.noDeviceReason(p),
      control: groupControlChannel(tcp, { timeoutMs: setupTimeoutMs }),
      fallback: async (peer) => linkOverGroup(tcp, peer),
      timeoutMs: LINK_WATCHDOG_MS,
      setupTimeoutMs,
      log: (line) => log(`data plane: ${line}`),
    });
    const links = made.choices.map((c) => (c.transport === 'fallback' ? { ...c, transport: 'tcp' as const } : c));
    const anyRdma = await allFlags(tcp, links.some((l) => l.transport === 'rdma'), setupTimeoutMs, 'whether any link is RDMA').catch(async (err) => {
      await made.group.close();
      throw err;
    });
    const summary = summarize(links, tcp.encryption);
    if (anyRdma.every((f) => f === 0)) {
      // Nothing to gain from the mesh schedules: keep TCP's own collectives, release the queue pairs.
      await made.group.close();
      log(`data plane: ${summary}`);
      return { group: tcp, links: withEncryption(links, tcp.encryption), summary };
    }
    // The mesh group owns the RDMA links; the TCP group under the fallback links closes with it.
    const closeMesh = made.group.close.bind(made.group);
    made.group.close = async () => {
      await closeMesh();
      await tcp.close();
    };
    log(`data plane: ${summary}`);
    return { group: made.group, links: withEncryption(links, tcp.encryption), summary };
  } catch (err) {
    await tcp.close();
    throw err;
  }
}
