/**
 * `pnpm bench:pull`: how fast a node takes a shard from a peer in its pod, against the raw rate of
 * the same link measured in the same run. Two network namespaces joined by a veth pair through a
 * bridge (test/harness/netns.ts; loopback when not root), a 1 GiB shard (BENCH_PULL_MIB) held by
 * one side:
 *   - raw: the shard's bytes from memory down one plain TCP socket (no request, hash or disk),
 *   - pull: the shard as a node pulls it (weights data plane: authenticated link, chunks requested
 *     and pipelined, each SHA-256-checked against the peer's digest and written, the file recorded),
 *   - sealed pull: the same over a link sealed as the daemon seals every link but a direct cable
 *     (AEAD records, transport/tcp/sealed-stream.ts; over loopback it would stay plain).
 * Rounds alternate (BENCH_ROUNDS, default 3); the best of each is compared. BENCH_LINK_RATE (e.g.
 * "2gbit") caps the link with tc tbf, to stand for a cable slower than this machine's memory.
 * Target (issue 22): pull >= 0.8x raw.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, openSync, closeSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTestNet, netnsAvailable, type TestNet } from '../../../test/harness/netns.js';

const MIB = Number(process.env.BENCH_PULL_MIB ?? 1024);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const RATE = process.env.BENCH_LINK_RATE;
const PORT = 46100;
const RAW_PORT = 46101;
const HERE = dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = resolve(HERE, '../../..');
const PEER = join(HERE, 'pull-peer.ts');
const SECRET = '5e'.repeat(32);

const work = mkdtempSync(join(os.tmpdir(), 'orchard-bench-pull-'));
const serveDir = join(work, 'serve');
mkdirSync(serveDir);
const FILE = 'model-00001-of-00002.safetensors';
// A valid safetensors shard: one U8 tensor of random bytes filling the file to MIB MiB.
const size = MIB * 1024 * 1024;
{
  let json = JSON.stringify({ shard: { dtype: 'U8', shape: [0], data_offsets: [0, 0] } });
  const headerBytes = (n: number) => 8 + n + ((8 - (n % 8)) % 8);
  const dataBytes = size - headerBytes(json.length + 32);
  json = JSON.stringify({ shard: { dtype: 'U8', shape: [dataBytes], data_offsets: [0, dataBytes] } });
  json += ' '.repeat(size - dataBytes - 8 - json.length);
  const head = Buffer.alloc(8 + json.length);
  head.writeBigUInt64LE(BigInt(json.length), 0);
  head.write(json, 8);
  const fd = openSync(join(serveDir, FILE), 'w');
  writeSync(fd, head);
  const piece = Buffer.alloc(64 * 1024 * 1024);
  for (let done = 0; done < dataBytes; done += piece.length) writeSync(fd, randomFillSync(piece), 0, Math.min(piece.length, dataBytes - done));
  closeSync(fd);
}

let net: TestNet | undefined;
const inNs = netnsAvailable();
const run = (host: number, args: string[]): ChildProcess => {
  const argv = ['--import', 'tsx', PEER, ...args];
  return inNs ? net!.hosts[host].spawn(process.execPath, argv, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] }) : spawn(process.execPath, argv, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
};
/** The first JSON line a helper prints (rejects if it exits first). */
const firstLine = (child: ChildProcess): Promise<any> =>
  new Promise((resolveLine, reject) => {
    let buf = '';
    child.stdout!.on('data', (d) => {
      buf += d;
      const i = buf.indexOf('\n');
      if (i >= 0) resolveLine(JSON.parse(buf.slice(0, i)));
    });
    child.once('exit', (code) => reject(new Error(`bench helper exited ${code}`)));
  });

try {
  if (inNs) {
    net = await createTestNet({ hosts: 2, multicast: false });
    if (RATE) for (const h of net.hosts) h.exec('tc', ['qdisc', 'replace', 'dev', 'eth0', 'root', 'tbf', 'rate', RATE, 'burst', '1mb', 'latency', '50ms']);
  }
  const host = inNs ? net!.hosts[0].ip : '127.0.0.1';
  const server = run(0, ['serve', serveDir, FILE, String(PORT), String(RAW_PORT), SECRET]);
  const ready = await firstLine(server);
  const availabilityPath = join(work, 'availability.json');
  writeFileSync(availabilityPath, JSON.stringify(ready));
  const mbps = (seconds: number) => size / seconds / 1e6;
  const raw: number[] = [];
  const pulled: number[] = [];
  const sealed: number[] = [];
  let cipher: string | null = null;
  /** Receiver CPU seconds per GB moved: what each byte costs, whatever else the machine is doing. */
  const rawCpu: number[] = [];
  const pullCpu: number[] = [];
  const sealedCpu: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const q = await firstLine(run(1, ['raw', host, String(RAW_PORT), String(size)]));
    raw.push(mbps(q.seconds));
    rawCpu.push(q.cpuSeconds / (size / 1e9));
    const into = join(work, `pull-${r}`);
    mkdirSync(into);
    const p = await firstLine(run(1, ['pull', host, String(PORT), SECRET, into, FILE, availabilityPath, 'plain']));
    if (p.bytes !== size) throw new Error(`pull moved ${p.bytes} bytes, expected ${size}`);
    pulled.push(mbps(p.seconds));
    pullCpu.push(p.cpuSeconds / (size / 1e9));
    rmSync(into, { recursive: true, force: true });
    mkdirSync(into);
    const e = await firstLine(run(1, ['pull', host, String(PORT), SECRET, into, FILE, availabilityPath, 'sealed']));
    if (e.bytes !== size) throw new Error(`sealed pull moved ${e.bytes} bytes, expected ${size}`);
    sealed.push(mbps(e.seconds));
    sealedCpu.push(e.cpuSeconds / (size / 1e9));
    cipher = e.cipher;
    rmSync(into, { recursive: true, force: true });
  }
  server.kill();
  const best = (xs: number[]) => Math.max(...xs);
  const where = inNs ? `namespace link (veth + bridge${RATE ? `, tc tbf ${RATE}` : ', unshaped'})` : 'loopback (not root: no namespaces)';
  console.log(`bench:pull — a ${MIB} MiB shard over a ${where}, ${ROUNDS} rounds, best of each`);
  console.log(`  raw TCP, memory to memory      ${best(raw).toFixed(0).padStart(6)} MB/s   (rounds: ${raw.map((x) => x.toFixed(0)).join(', ')})`);
  console.log(`  pod pull (hash + disk + log)   ${best(pulled).toFixed(0).padStart(6)} MB/s   (rounds: ${pulled.map((x) => x.toFixed(0)).join(', ')}; plain, as over a direct cable)`);
  console.log(`  pod pull, ${(cipher ?? 'plain').padEnd(20)} ${best(sealed).toFixed(0).padStart(6)} MB/s   (rounds: ${sealed.map((x) => x.toFixed(0)).join(', ')}; sealed as by default off a direct cable)`);
  console.log(`  ratio pull / raw               ${(best(pulled) / best(raw)).toFixed(2)}x   (target >= 0.8x)`);
  console.log(`  ratio sealed pull / raw        ${(best(sealed) / best(raw)).toFixed(2)}x`);
  const least = (xs: number[]) => Math.min(...xs);
  console.log(`  receiver CPU per GB            raw ${least(rawCpu).toFixed(2)} s, pull ${least(pullCpu).toFixed(2)} s, sealed pull ${least(sealedCpu).toFixed(2)} s (all threads; least of the rounds)`);
  console.log(`  load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} on ${os.availableParallelism()} cores`);
} finally {
  await net?.destroy();
  rmSync(work, { recursive: true, force: true });
}
