/**
 * A local stand-in for the Hugging Face hub, for tests: serves model directories at the hub's real
 * URL shapes (`/api/models/ORG/NAME/revision/REV?blobs=true`, `/ORG/NAME/resolve/REV/FILE` with
 * Range support) on 127.0.0.1 (or `host`), with faults to inject and counters to assert on —
 * in-process, or as JSON from `GET /_stats` when it runs as its own process (fake-hub-main.ts).
 */
import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';

export interface FakeHubFaults {
  /** Cut the connection after this many body bytes of a file, for the first `times` requests of it. */
  dropAfter?: { file: string; bytes: number; times: number };
  /** Flip a byte in this file's content as served (a corrupt mirror). */
  corrupt?: { file: string };
  /** Require this bearer token. */
  token?: string;
  /** Pace file bodies at about this many bytes per second (in 8 KiB pieces), so a download takes a while. */
  throttleBytesPerSecond?: number;
}

export interface FakeHub {
  url: string;
  commit: string;
  /** Body bytes served per file path. */
  servedBytes: Map<string, number>;
  /** Body bytes served per `ORG/NAME/FILE` (repos sharing file names kept apart). */
  servedByRepo: Map<string, number>;
  /** Range headers seen per file path. */
  ranges: Map<string, string[]>;
  /** Every request received, in order (method and path). */
  requests: string[];
  faults: FakeHubFaults;
  close(): Promise<void>;
}

const gitSha1 = (buf: Buffer) => createHash('sha1').update(`blob ${buf.length}\0`).update(buf).digest('hex');

/** Every file under `dir`, as paths relative to it. */
function filesUnder(dir: string, prefix = ''): string[] {
  return readdirSync(join(dir, prefix)).flatMap((f) => {
    const rel = prefix ? `${prefix}/${f}` : f;
    return statSync(join(dir, rel)).isDirectory() ? filesUnder(dir, rel) : [rel];
  });
}

export async function startFakeHub(repos: Record<string, string>, faults: FakeHubFaults = {}, listen: { host?: string; port?: number } = {}): Promise<FakeHub> {
  const commit = createHash('sha1').update(JSON.stringify(Object.keys(repos))).digest('hex');
  const servedBytes = new Map<string, number>();
  const servedByRepo = new Map<string, number>();
  const ranges = new Map<string, string[]>();
  const dropCount = new Map<string, number>();

  const requests: string[] = [];
  const server: Server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    const u = new URL(req.url ?? '/', 'http://x');
    if (faults.token && req.headers.authorization !== `Bearer ${faults.token}`) {
      res.writeHead(401).end('{"error":"unauthorized"}');
      return;
    }
    if (u.pathname === '/_stats') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ servedBytes: Object.fromEntries(servedBytes), servedByRepo: Object.fromEntries(servedByRepo), ranges: Object.fromEntries(ranges) }));
      return;
    }
    const api = /^\/api\/models\/([^/]+\/[^/]+)\/revision\/([^/]+)$/.exec(u.pathname);
    if (api) {
      const dir = repos[api[1]];
      if (!dir) return void res.writeHead(404).end('{"error":"Repository not found"}');
      // Paths inside folders as the hub lists them ("Q4_K_M/model-00001-of-00002.gguf").
      const siblings = filesUnder(dir)
        .map((f) => {
          const buf = readFileSync(join(dir, f));
          return f.endsWith('.safetensors')
            ? { rfilename: f, size: buf.length, lfs: { sha256: createHash('sha256').update(buf).digest('hex'), size: buf.length } }
            : { rfilename: f, size: buf.length, blobId: gitSha1(buf) };
        });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: api[1], sha: commit, siblings }));
      return;
    }
    const file = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(u.pathname);
    if (!file || !repos[file[1]]) return void res.writeHead(404).end('not found');
    const name = decodeURIComponent(file[3]);
    let body: Buffer;
    try {
      body = Buffer.from(readFileSync(join(repos[file[1]], name)));
    } catch {
      return void res.writeHead(404).end('not found');
    }
    if (faults.corrupt?.file === name) body[body.length >> 1] ^= 0xff;
    let start = 0;
    let end = body.length - 1;
    const range = req.headers.range;
    if (range) {
      ranges.set(name, [...(ranges.get(name) ?? []), range]);
      const m = /^bytes=(\d+)-(\d*)$/.exec(range);
      if (!m) return void res.writeHead(416).end();
      start = Number(m[1]);
      end = m[2] ? Math.min(Number(m[2]), body.length - 1) : body.length - 1;
      if (start >= body.length) return void res.writeHead(416, { 'content-range': `bytes */${body.length}` }).end();
    }
    const slice = body.subarray(start, end + 1);
    const headers = {
      'content-length': String(slice.length),
      'accept-ranges': 'bytes',
      ...(range ? { 'content-range': `bytes ${start}-${end}/${body.length}` } : {}),
    };
    if (req.method === 'HEAD') {
      res.writeHead(200, { ...headers, 'content-length': String(body.length) }).end();
      return;
    }
    res.writeHead(range ? 206 : 200, headers);
    const count = (n: number) => {
      servedBytes.set(name, (servedBytes.get(name) ?? 0) + n);
      servedByRepo.set(`${file[1]}/${name}`, (servedByRepo.get(`${file[1]}/${name}`) ?? 0) + n);
    };
    const drop = faults.dropAfter;
    if (drop && drop.file === name && (dropCount.get(name) ?? 0) < drop.times && slice.length > drop.bytes) {
      dropCount.set(name, (dropCount.get(name) ?? 0) + 1);
      count(drop.bytes);
      // End the connection cleanly after exactly `bytes` (a reset could discard bytes still in flight,
      // making the resume offset depend on timing).
      res.write(slice.subarray(0, drop.bytes), () => req.socket.end());
      return;
    }
    count(slice.length);
    const rate = faults.throttleBytesPerSecond;
    if (!rate) return void res.end(slice);
    const piece = 8192;
    let at = 0;
    const next = () => {
      if (res.destroyed) return;
      const end = Math.min(at + piece, slice.length);
      res.write(slice.subarray(at, end));
      at = end;
      if (at >= slice.length) res.end();
      else setTimeout(next, (piece / rate) * 1000);
    };
    next();
  });
  const host = listen.host ?? '127.0.0.1';
  await new Promise<void>((r) => server.listen(listen.port ?? 0, host, r));
  const addr = server.address() as { port: number };
  return {
    url: `http://${host}:${addr.port}`,
    commit,
    servedBytes,
    servedByRepo,
    requests,
    ranges,
    faults,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
