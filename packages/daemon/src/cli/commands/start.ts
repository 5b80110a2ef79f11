import type { Command } from 'commander';
import { resolveOptions, OptionsError } from '../../config/options.js';
import { createLogger } from '../../logger.js';
import { DataDirError, prepareDataDir } from '../../config/data-dir.js';
import { startOrchard, type Orchard } from '../../orchard.js';
import { CliError } from '../errors.js';

const collect = (v: string, prev: string[] = []) => [...prev, v];

/** `orchard start`: the daemon in the foreground until SIGINT/SIGTERM. */
export function registerStart(program: Command): void {
  program
    .command('start')
    .description('run the Orchard daemon in the foreground (discovery, cluster state, HTTP API)')
    .option('--data-dir <dir>', 'identity, caches and config (env ORCHARD_DATA_DIR; default ~/.orchard)')
    .option('--listen <multiaddr>', 'libp2p listen address, repeatable (env ORCHARD_LISTEN; default /ip4/0.0.0.0/tcp/52416)', collect)
    .option('--bootstrap <multiaddr...>', 'peers to dial when multicast is blocked, e.g. /ip4/10.0.0.2/tcp/52416/p2p/12D3... (env ORCHARD_BOOTSTRAP)')
    .option('--api-host <host>', 'HTTP API address (env ORCHARD_API_HOST; default 127.0.0.1)')
    .option('--api-port <port>', 'HTTP API port (env ORCHARD_API_PORT; default 52415)')
    .option('--api-token <token>', 'Bearer token for the API; required off loopback (env ORCHARD_API_TOKEN)')
    .option('--api-allowed-hosts <names>', 'more host names clients reach the API by (a proxy, a DNS name), comma-separated, repeatable; loopback and --api-host always work (env ORCHARD_API_ALLOWED_HOSTS)', collect)
    .option('--cors-origins <origins>', 'browser origins allowed to call the API besides the dashboard and localhost, comma-separated, * for any (env ORCHARD_CORS_ORIGINS)')
    .option('--cluster-key <file>', 'private pod: only daemons with this key (orchard key new) may join (env ORCHARD_CLUSTER_KEY)')
    .option('--name <name>', 'node name shown to people (env ORCHARD_NAME; default hostname)')
    .option('--config <file>', 'JSON config file with the same settings (env ORCHARD_CONFIG; default <data-dir>/config.json)')
    .option('--gone-after <seconds>', 'mark a silent node gone after this many seconds (env ORCHARD_GONE_AFTER; default 5)')
    .option('--probe-port <port>', 'TCP port of the link-probe server (env ORCHARD_PROBE_PORT; default any free port)')
    .option('--data-plane-encryption <mode>', 'encrypt tensor traffic: auto (every link but a Thunderbolt cable or this machine), always, never (env ORCHARD_DATA_PLANE_ENCRYPTION; default auto)')
    .option('--data-plane-cipher <name>', 'cipher this node proposes: auto (the faster here), aes-256-gcm, chacha20-poly1305 (env ORCHARD_DATA_PLANE_CIPHER; default auto)')
    .option('--no-mdns', 'do not use multicast discovery (bootstrap peers only)')
    .option('--rebench', 're-run the capability micro-benchmark instead of using the cached figures')
    .option('--backend <name>', 'what runners compute on: auto (a hardware GPU if there is one, else cpu), cpu, gpu, reference or wasm (env ORCHARD_ENGINE_BACKEND; default auto)')
    .option('--allow-software-gpu', 'let gpu/auto use a software WebGPU adapter such as lavapipe (env ORCHARD_ALLOW_SOFTWARE_GPU=1)')
    .option('--engine-threads <n>', 'kernel threads per runner (env ORCHARD_ENGINE_THREADS; default the cores divided among the ranks here)')
    .option('--context <tokens>', "tokens per sequence instances serve unless a load asks for another (env ORCHARD_CONTEXT; default 4096 or the model's maximum if smaller)")
    .option('--keep-alive <duration>', 'unload a model after this long without requests, e.g. 30m, 2h, never (env ORCHARD_KEEP_ALIVE; default 30m); the next request loads it again')
    .option('--batch <n>', 'sequences an instance decodes together in one step, on one node or split (env ORCHARD_BATCH; default 8)')
    .option('--prefix-cache <size>', 'KV cache kept per instance for reusing prompt prefixes, e.g. 64MiB, 1GiB, 0 for none (env ORCHARD_PREFIX_CACHE; default 64MiB)')
    .option('--speculate <mode>', 'speculative decoding for requests that do not ask, split instances and GPU ranks included: prompt-lookup (drafts from the text so far), draft (a small draft model, --draft-model), mtp (the multi-token-prediction layer of the checkpoint, DeepSeek-V3 num_nextn_predict_layers; one-rank CPU instances) or off; draft lengths adapt to what drafts earn; the output is the same either way (env ORCHARD_SPECULATE; default off)')
    .option('--draft-model <dir>', "a small model sharing the served model's tokenizer (HF directory or GGUF) that the instance's driving runner runs on CPU to draft tokens for requests speculating with draft (env ORCHARD_DRAFT_MODEL; default none)")
    .option('--max-queue <n>', 'requests waiting per instance before 429 (env ORCHARD_MAX_QUEUE; default 64)')
    .option('--network <name>', 'join this wide-area network of pods (env ORCHARD_NETWORK; default none: nothing is lent, routed or seen)')
    .option('--network-bootstrap <multiaddr...>', 'relay/bootstrap nodes of the network, e.g. /ip4/203.0.113.7/tcp/52418/p2p/12D3... (env ORCHARD_NETWORK_BOOTSTRAP)')
    .option('--network-listen <multiaddr>', 'wide-area listen address, repeatable (env ORCHARD_NETWORK_LISTEN; default /ip4/0.0.0.0/tcp/52417)', collect)
    .option('--network-announce <multiaddr>', 'address others should dial, when behind a port mapping (repeatable)', collect)
    .option('--network-region <label@lat,lon>', 'where this pod says it is on the network map, rounded to whole degrees, e.g. Berlin@52.5,13.4 (default: not shown)')
    .option('--network-max-price <credits>', 'pay at most this many credits per 1M tokens (default: any)')
    .option('--network-trusted <peer...>', 'send jobs only to these peer ids (default: any peer of the network)')
    .option('--no-network-route', 'do not send requests for models this pod lacks to the network')
    .option('--network-private-addresses', 'keep private (LAN) addresses in the DHT: a network inside one site, or tests')
    .option('--log-level <level>', 'pino level: trace, debug, info, warn, error (env ORCHARD_LOG_LEVEL; default info)')
    .option('--log-format <format>', 'console lines: auto (readable on a terminal, JSON otherwise), pretty or json (env ORCHARD_LOG_FORMAT)')
    .option('--log-file <file>', 'JSON log file read by `orchard logs`, rotated at 10 MB, 5 kept; none for no file (env ORCHARD_LOG_FILE; default <data-dir>/logs/orchard.log)')
    .action(async (flags: Record<string, unknown>) => {
      let options;
      try {
        // commander's --no-mdns default (true) must not hide env/config values; an absent switch is no setting.
        const raw = {
          ...flags,
          mdns: flags.mdns === false ? false : undefined,
          allowSoftwareGpu: flags.allowSoftwareGpu ? true : undefined,
          networkRoute: flags.networkRoute === false ? false : undefined,
          networkPrivateAddresses: flags.networkPrivateAddresses ? true : undefined,
        };
        options = resolveOptions(raw);
      } catch (err) {
        if (err instanceof OptionsError) throw new CliError(err.message, 2);
        throw err;
      }
      // Before the log file (which lives in the data dir by default): one clear line if the dir is unusable.
      try {
        prepareDataDir(options.dataDir);
      } catch (err) {
        if (err instanceof DataDirError) throw new CliError(err.message, 1);
        throw err;
      }
      const log = createLogger({ level: options.logLevel, format: options.logFormat, file: options.logFile });
      // A stray rejection inside a network library must not take the whole pod member down.
      process.on('unhandledRejection', (err) => log.error({ err }, 'unhandled rejection (ignored)'));
      let node: Orchard;
      try {
        node = await startOrchard(options, log);
      } catch (err) {
        const message = (err as Error)?.message ?? String(err);
        if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE' || /EADDRINUSE/.test(message)) {
          const addr = /address already in use (\S+)/.exec(message)?.[1] ?? '';
          throw new CliError(`address ${addr} already in use; is another orchard daemon running? Pick others with --listen and --api-port`, 1);
        }
        // Library errors can span lines (with stacks); the user gets the first line.
        throw new CliError(message.split('\n')[0], 1);
      }
      await new Promise<void>((resolve) => {
        const stop = (signal: string) => {
          log.info({ signal }, 'stopping');
          node.stop().finally(resolve);
        };
        process.once('SIGINT', () => stop('SIGINT'));
        process.once('SIGTERM', () => stop('SIGTERM'));
      });
    });
}
