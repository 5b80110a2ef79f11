import type { Command } from 'commander';
import { mkdirSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { loadOrCreatePeerKey } from '../../identity/peer-key.js';
import { createLogger } from '../../logger.js';
import { NetworkRelay } from '../../network/relay.js';
import { parseNetworkName } from '../../network/settings.js';
import { CliError } from '../errors.js';

const collect = (v: string, prev: string[] = []) => [...prev, v];

interface RelayFlags {
  network: string;
  listen?: string[];
  announce?: string[];
  bootstrap?: string[];
  dataDir?: string;
  maxReservations?: string;
  privateAddresses?: boolean;
  logLevel?: string;
}

/**
 * `orchard relay`: a network's public bootstrap peer, circuit relay and DHT server (what a
 * community runs on a VPS). It serves no model and exposes no API; it prints the multiaddrs pods
 * pass to `--network-bootstrap`, then logs what it relays every 30 s.
 */
export function registerRelay(program: Command): void {
  program
    .command('relay')
    .description('run a public bootstrap + relay + DHT server node for a network of pods')
    .requiredOption('--network <name>', 'the network this relay serves')
    .option('--listen <multiaddr>', 'listen address, repeatable (default /ip4/0.0.0.0/tcp/52418)', collect)
    .option('--announce <multiaddr>', 'public address to announce when behind a port mapping, repeatable', collect)
    .option('--bootstrap <multiaddr...>', 'other relays of the same network')
    .option('--data-dir <dir>', "the relay's identity (its peer id must stay the same for pods to find it; default ~/.orchard/relay)")
    .option('--max-reservations <n>', 'pods that may listen through this relay at once (default 256)')
    .option('--private-addresses', 'keep private addresses in the DHT (a network inside one site, or tests)')
    .option('--log-level <level>', 'pino level (default info)')
    .action(async (flags: RelayFlags) => {
      let network: string;
      try {
        network = parseNetworkName(flags.network);
      } catch (err) {
        throw new CliError((err as Error).message, 2);
      }
      const maxReservations = flags.maxReservations === undefined ? undefined : Number(flags.maxReservations);
      if (maxReservations !== undefined && (!Number.isInteger(maxReservations) || maxReservations < 1)) throw new CliError(`--max-reservations must be a whole number of at least 1, got ${JSON.stringify(flags.maxReservations)}`, 2);
      const dataDir = resolve(flags.dataDir ?? join(os.homedir(), '.orchard', 'relay'));
      mkdirSync(dataDir, { recursive: true, mode: 0o700 });
      const log = createLogger(flags.logLevel ?? 'info');
      process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection (ignored)'));
      const { key } = await loadOrCreatePeerKey(dataDir);
      let relay: NetworkRelay;
      try {
        relay = await NetworkRelay.start({
          key,
          log,
          settings: { network, listen: flags.listen ?? ['/ip4/0.0.0.0/tcp/52418'], announce: flags.announce ?? [], bootstrap: flags.bootstrap ?? [], privateAddresses: !!flags.privateAddresses, maxReservations },
        });
      } catch (err) {
        throw new CliError(`relay did not start: ${((err as Error).message ?? String(err)).split('\n')[0]}`, 1);
      }
      log.info({ network, peerId: relay.node.peerId.toString(), addresses: relay.addresses() }, 'relay started');
      process.stdout.write(`orchard relay for network "${network}"; pods join with:\n${relay.addresses().map((a) => `  orchard start --network ${network} --network-bootstrap ${a}`).join('\n')}\n`);
      const timer = setInterval(() => {
        const s = relay.status();
        log.info({ connections: s.connections, reservations: s.reservations, pods: s.nodes.filter((n) => n.online).length, receipts: s.receipts }, 'relay status');
      }, 30_000);
      await new Promise<void>((done) => {
        const stop = (signal: string) => {
          log.info({ signal }, 'stopping');
          clearInterval(timer);
          relay.stop().finally(done);
        };
        process.once('SIGINT', () => stop('SIGINT'));
        process.once('SIGTERM', () => stop('SIGTERM'));
      });
    });
}
