/**
 * Builds `size` TCP groups inside this process over real loopback sockets: for tests that want
 * the TCP backend without child processes.
 */
import type { Group } from '../group.js';
import { createTcpGroup, type TcpGroupOptions } from '../tcp/group.js';
import { listenTcp } from '../tcp/listener.js';

export type LocalTcpOptions = Partial<Omit<TcpGroupOptions, 'rank' | 'peers' | 'listener'>>;

export async function createLocalTcpGroups(size: number, options: LocalTcpOptions = {}): Promise<Group[]> {
  const listeners = await Promise.all(Array.from({ length: size }, () => listenTcp({ host: '127.0.0.1' })));
  const peers = listeners.map((l) => ({ addresses: [l.address] }));
  return Promise.all(
    listeners.map((listener, rank) =>
      createTcpGroup({ groupId: 'local-test', secret: 'local-test-secret', ...options, rank, peers, listener }),
    ),
  );
}
