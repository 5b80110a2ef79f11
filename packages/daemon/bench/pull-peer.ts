/**
 * One side of `pnpm bench:pull`, run inside a network namespace (bench/pull.ts starts both):
 *
 *   serve DIR FILE PORT RAWPORT SECRET_HEX  — holds DIR/FILE whole (checked once), serves it over the
 *       weights data plane on PORT and, for the raw baseline, sends its bytes from memory to whoever
 *       connects to RAWPORT; prints one JSON line {availability} when ready.
 *   raw HOST RAWPORT BYTES                  — reads BYTES from the raw port into memory; prints {seconds, cpuSeconds}.
 *   pull HOST PORT SECRET_HEX DIR FILE AVAILABILITY_JSON_PATH plain|sealed — pulls the file into DIR
 *       as a node would from a peer (chunks striped over the link, each hashed and written, the file
 *       recorded), over a plain link or one sealed by the daemon's default rule (every link but a
 *       direct cable); prints {seconds, bytes, cpuSeconds, cipher} (CPU: the receiving process, all
 *       its threads). The server never asks for encryption: the puller decides.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { contentKey } from '../src/store/chunked/chunk-file.js';
import { ChunkRegistry, type Availability } from '../src/store/chunked/registry.js';
import { pullFile } from '../src/store/pod/pull-file.js';
import { connectLinks } from '../src/store/peers/pod-access.js';
import { DEFAULT_SECURITY, encryptionPolicy } from '../src/runner/link-security.js';
import { startWeightsServer } from '../src/store/peers/weights-server.js';

const [mode, ...args] = process.argv.slice(2);
const print = (v: unknown) => process.stdout.write(`${JSON.stringify(v)}\n`);

if (mode === 'serve') {
  const [dir, file, port, rawPort, secretHex] = args;
  const path = join(dir, file);
  const bytes = readFileSync(path);
  const { createHash } = await import('node:crypto');
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const registry = new ChunkRegistry();
  const f = await registry.open(path, { key: contentKey({ sha256 })!, size: bytes.length, sha256, label: file });
  if (!f.wholeVerified && !(await f.adopt())) throw new Error(`${path} does not match its own hash`);
  await startWeightsServer({ secret: Buffer.from(secretHex, 'hex'), registry, port: Number(port) });
  // The raw baseline: the same bytes, from memory, down a plain socket (no request, no hash, no disk).
  const raw = net.createServer((s) => {
    s.on('error', () => s.destroy());
    s.end(bytes);
  });
  await new Promise<void>((r) => raw.listen(Number(rawPort), '0.0.0.0', r));
  print({ availability: registry.availability(f), sha256, size: bytes.length });
} else if (mode === 'raw') {
  const [host, rawPort, total] = args;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let got = 0;
  await new Promise<void>((resolve, reject) => {
    const s = net.connect({ host, port: Number(rawPort), noDelay: true });
    s.on('data', (d: Buffer) => (got += d.length));
    s.on('end', resolve);
    s.on('error', reject);
  });
  if (got !== Number(total)) throw new Error(`raw: got ${got} of ${total} bytes`);
  const cpu = process.cpuUsage(cpu0);
  print({ seconds: (performance.now() - t0) / 1000, cpuSeconds: (cpu.user + cpu.system) / 1e6 });
} else if (mode === 'pull') {
  const [host, port, secretHex, dir, file, availabilityPath, how] = args;
  const encryption = how === 'sealed' ? encryptionPolicy(DEFAULT_SECURITY) : undefined;
  let cipher: string | null = null;
  const { availability, sha256, size } = JSON.parse(readFileSync(availabilityPath, 'utf8')) as { availability: Availability; sha256: string; size: number };
  const registry = new ChunkRegistry();
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const r = await pullFile({
    registry,
    path: join(dir, file),
    info: { key: availability.key, size, sha256, label: file },
    route: {
      peers: async () => [
        {
          id: 'server',
          availability,
          links: async (signal) => {
            const links = await connectLinks([{ host, port: Number(port) }], Buffer.from(secretHex, 'hex'), signal, encryption);
            cipher = links[0]?.cipher ?? null;
            return links;
          },
        },
      ],
    },
  });
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await registry.closeAll();
  if (!r.complete) throw new Error('pull: the file is not complete');
  print({ seconds, bytes: r.bySource.server ?? 0, cpuSeconds: (cpu.user + cpu.system) / 1e6, cipher });
} else {
  throw new Error(`unknown mode ${mode}`);
}
