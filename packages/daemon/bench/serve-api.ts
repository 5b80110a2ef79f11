/**
 * `BENCH_PARTS=api pnpm bench:serve`: what the serving path costs per token on the bundled model
 * (models/orchard-demo), in one run (issue 35):
 *   - api-stream: tok/s of one request streamed through the OpenAI API of an in-process daemon
 *     (runner process, IPC, executor, detokenizing, SSE), against the engine alone decoding the same
 *     prompt in this process with the same kernels and threads (target >= 0.9x);
 *   - api-batch-8: the summed tok/s of 8 concurrent streamed requests against one at a time (target >= 3x);
 *     beside it the ceiling: the engine alone stepping 8 sequences in one forwardBatch against one
 *     sequence, same kernels and threads (engine-batch-8). This model is 4 layers of hidden 192: its
 *     weights (~1.6M parameters) stay in the CPU's cache, so a step of 8 costs nearly 8 steps of one
 *     (compute, not memory reads) and batching saves only the per-kernel call overheads. With more
 *     than one thread the same steps run on one thread too (the daemon gives a lone rank all cores):
 *     a step of 8 crosses the kernels' threshold for sharing work with the worker threads, one does not;
 *   - per-stage time per token: the runner alone (IPC, no HTTP) minus the engine alone, and the
 *     daemon-side stages replayed on the same tokens in isolation (detokenizing with stop strings,
 *     an output constraint's mask, SSE encoding, a request log line);
 *   - CPU time per token of each process (the wall-time lines swing with the other work on a shared
 *     machine, these far less): the engine alone, the runners, the daemon with its client, the daemon
 *     apart from its client (the same streams from a worker-thread client), and the engine's own
 *     steps of one and of 8 sequences (what batching saves per token on this model).
 * The client reads the stream in the same process as the daemon (as a local client's bytes), so
 * its own parsing counts against the API line: it splits on event boundaries and parses each event's
 * JSON, on node:http (fetch's web streams cost this process more CPU per token than the daemon's
 * whole serving path, and a real client runs in a process of its own).
 * The runners send token messages at least 2 ms apart (runner/token-batch.ts): a stream's stamps
 * come in bursts on this model (a step is ~0.3 ms), which the rates, taken from a request's first to
 * its last token (both sent at once), do not see.
 */
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { Worker } from 'node:worker_threads';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { argmax, compileConstraint, createWasmBackend, generate, loadInProcessModel, loadShard, loadTokenizer, pipelineStages, TextStream } from '@orchard/engine';
import { startOrchard, type Orchard } from '../src/orchard.js';
import { resolveOptions } from '../src/config/options.js';
import { startLocalInstance } from '../src/runner/runner-process.js';
import { processCpuSeconds } from './proc-cpu.js';

const DEMO = join(dirname(fileURLToPath(import.meta.url)), '../../../models/orchard-demo');
const REPO = 'orchard/orchard-demo';
const PROMPT = 'And God said, Let there be light: and there was light. And';
const TOKENS = Number(process.env.BENCH_API_TOKENS ?? 100);
/** Requests per measured sample (see repeated()). */
const REPEAT = Number(process.env.BENCH_API_REPEAT ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/**
 * The daemon gives a lone rank all cores (supervisor.ts): the engine alone gets the same. BENCH_THREADS=n
 * gives the engine, the runner and the daemon's runner n threads (--engine-threads).
 */
const THREADS = Number(process.env.BENCH_THREADS ?? Math.max(1, os.availableParallelism()));

/** Decode rate from stamps of each token's arrival: the first token ends the prefill. */
function rate(stamps: number[]): number {
  if (stamps.length < 2) throw new Error(`only ${stamps.length} tokens came back; raise BENCH_API_TOKENS or change the prompt`);
  return ((stamps.length - 1) * 1000) / (stamps[stamps.length - 1] - stamps[0]);
}

/** Summed rate of concurrent streams while all of them run: from the last one's first token to the first one's last. */
function overlapRate(runs: number[][]): number {
  const from = Math.max(...runs.map((r) => r[0]));
  const to = Math.min(...runs.map((r) => r[r.length - 1]));
  if (to <= from) throw new Error('8 concurrent streams did not overlap');
  return (runs.reduce((a, r) => a + r.filter((t) => t > from && t <= to).length, 0) * 1000) / (to - from);
}

/**
 * Rate over REPEAT requests run back to back (each stream is only ~100 tokens: tens of ms, about a
 * scheduler slice on a loaded machine): tokens after each first one over the summed decode times.
 */
async function repeated(once: () => Promise<number[]>): Promise<number> {
  let tokens = 0;
  let ms = 0;
  for (let k = 0; k < REPEAT; k++) {
    const stamps = await once();
    rate(stamps);
    tokens += stamps.length - 1;
    ms += stamps[stamps.length - 1] - stamps[0];
  }
  return (tokens * 1000) / ms;
}

/** One streamed completion: arrival time of each token's event and the text. */
function streamOnce(d: Orchard, prompt: string): Promise<{ stamps: number[]; text: string }> {
  const body = JSON.stringify({ model: REPO, prompt, max_tokens: TOKENS, temperature: 0, stream: true });
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: d.apiPort, path: '/v1/completions', method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }, timeout: 60_000 }, (res) => {
      res.setEncoding('utf8');
      let rest = '';
      if (res.statusCode !== 200) {
        res.on('data', (c: string) => (rest += c));
        res.on('end', () => reject(new Error(`api-stream: HTTP ${res.statusCode}: ${rest}`)));
        return;
      }
      const stamps: number[] = [];
      let text = '';
      res.on('data', (chunk: string) => {
        const now = performance.now();
        rest += chunk;
        const events = rest.split('\n\n');
        rest = events.pop()!;
        for (const e of events) {
          if (!e.startsWith('data: {')) continue;
          const piece = (JSON.parse(e.slice(6)) as { choices: { text?: string }[] }).choices[0]?.text;
          // One byte-level token per character of this model (ASCII text).
          if (piece) for (let k = 0; k < piece.length; k++) stamps.push(now);
          if (piece) text += piece;
        }
      });
      res.on('end', () => resolve({ stamps, text }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('api-stream: no answer within 60 s')));
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * The client of the CPU lines that split the daemon from its client: the same requests and parsing as
 * streamOnce, on a worker thread of this process, which reports its own thread's CPU time (Linux
 * /proc/thread-self: schedstat's nanoseconds, else stat's 10 ms ticks; NaN elsewhere). Plain JS: a worker does not inherit tsx.
 */
const CLIENT_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const fs = require('node:fs');
const cpuUs = () => {
  try {
    return Number(fs.readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]) / 1e3;
  } catch {}
  try {
    const f = fs.readFileSync('/proc/thread-self/stat', 'utf8');
    const x = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return (Number(x[11]) + Number(x[12])) * 1e4;
  } catch { return NaN; }
};
const { port, model, tokens, batches } = workerData;
const stream = (prompt) => new Promise((resolve, reject) => {
  const body = JSON.stringify({ model, prompt, max_tokens: tokens, temperature: 0, stream: true });
  const req = http.request({ host: '127.0.0.1', port, path: '/v1/completions', method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }, timeout: 60000 }, (res) => {
    res.setEncoding('utf8');
    let rest = '';
    let n = 0;
    res.on('data', (chunk) => {
      rest += chunk;
      const events = rest.split('\\n\\n');
      rest = events.pop();
      for (const e of events) if (e.startsWith('data: {')) n += (JSON.parse(e.slice(6)).choices[0]?.text ?? '').length;
    });
    res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error('HTTP ' + res.statusCode))));
  });
  req.on('timeout', () => req.destroy(new Error('no answer within 60 s')));
  req.on('error', reject);
  req.end(body);
});
parentPort.once('message', async () => {
  const c0 = cpuUs();
  let n = 0;
  for (const batch of batches) n += (await Promise.all(batch.map(stream))).reduce((a, b) => a + b, 0);
  parentPort.postMessage({ tokens: n, cpuUs: cpuUs() - c0 });
});
parentPort.postMessage('ready');
`;

/**
 * CPU per token of the daemon alone (this process less the client's thread) and of the client, while
 * a worker-thread client streams `batches` (each batch's prompts at once), microseconds.
 */
async function daemonAndClientCpu(d: Orchard, batches: string[][]): Promise<{ daemon: number; client: number }> {
  const w = new Worker(CLIENT_WORKER, { eval: true, workerData: { port: d.apiPort, model: REPO, tokens: TOKENS, batches } });
  try {
    const next = () => new Promise<unknown>((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
    await next();
    const self0 = process.cpuUsage();
    const result = next();
    w.postMessage('go');
    const { tokens, cpuUs } = (await result) as { tokens: number; cpuUs: number };
    const self = process.cpuUsage(self0);
    return { daemon: (self.user + self.system - cpuUs) / tokens, client: cpuUs / tokens };
  } finally {
    await w.terminate();
  }
}

/**
 * The engine alone decoding `prompts` side by side, one forwardBatch per step (greedy), TOKENS steps:
 * the summed decode rate, tok/s. With one prompt it is the same loop for one sequence.
 */
async function engineSteps(shard: ReturnType<typeof loadShard>, prompts: number[][]): Promise<number> {
  const caches = prompts.map(() => shard.newCache(shard.maxSeqLen));
  try {
    let next: number[] = [];
    for (let i = 0; i < prompts.length; i++) next.push(argmax(await shard.forward({ tokens: prompts[i] }, caches[i])));
    const t0 = performance.now();
    for (let s = 1; s < TOKENS; s++) next = (await shard.forwardBatch(next.map((id, i) => ({ input: { tokens: [id] }, cache: caches[i] })))).map((l) => argmax(l));
    return ((TOKENS - 1) * prompts.length * 1000) / (performance.now() - t0);
  } finally {
    for (const c of caches) shard.releaseCache(c);
  }
}

/** Eight streams at once: their summed rate while all eight stream (as bench/serve.ts's eightStreams). */
async function eightStreams(d: Orchard): Promise<number> {
  const runs = await Promise.all(Array.from({ length: 8 }, (_, i) => streamOnce(d, PROMPT.slice(0, 30 + i))));
  return overlapRate(runs.map((r) => r.stamps));
}

/** Median time per call of `f` over `n` calls, after one unmeasured call, in microseconds per unit. */
function perToken(units: number, f: () => void, n = 30): number {
  f();
  const ts: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    f();
    ts.push(performance.now() - t0);
  }
  ts.sort((a, b) => a - b);
  return (ts[n >> 1] * 1000) / units;
}

/** Daemon-side per-token stages replayed on `ids` in isolation, microseconds per token. */
async function stageCosts(ids: number[]): Promise<{ name: string; us: number }[]> {
  const tok = loadTokenizer(DEMO);
  const decode = (t: number[]) => tok.decode(t, { skipSpecialTokens: true });
  const detok = perToken(ids.length, () => {
    const s = new TextStream(decode, ['\n\n']);
    for (const id of ids) s.push(id);
  });
  // A long answer: the same tokens 20 times (a stream decoding all its ids at each push grows with it).
  const long = Array.from({ length: 20 }, () => ids).flat();
  const detokLong = perToken(long.length, () => {
    const s = new TextStream(decode, ['\n\n']);
    for (const id of long) s.push(id);
  }, 5);
  // Compiled once; each timed pass gets a fresh matcher (compiling it is not per-token work).
  const compile = () => compileConstraint({ type: 'grammar', ebnf: 'root ::= [^\\x00]*' }, tok.vocabulary(), { vocabSize: 257, stopIds: [256] });
  const logits = new Float32Array(257);
  const maskTimes: number[] = [];
  for (let r = 0; r < 10; r++) {
    const c = await compile();
    const t0 = performance.now();
    for (const id of ids) {
      await c.mask(logits);
      c.accept(id);
    }
    maskTimes.push(performance.now() - t0);
    c.dispose();
  }
  maskTimes.sort((a, b) => a - b);
  const mask = (maskTimes[5] * 1000) / ids.length;
  const chunk = (text: string) => ({ id: 'cmpl-0123456789', object: 'text_completion', created: 1700000000, model: REPO, choices: [{ index: 0, text, logprobs: null, finish_reason: null }] });
  const sse = perToken(ids.length, () => {
    let bytes = 0;
    for (const id of ids) bytes += `data: ${JSON.stringify(chunk(String.fromCharCode(id)))}\n\n`.length;
    if (bytes < 0) throw new Error('unreachable');
  });
  return [
    { name: `detokenize (TextStream.push, 1 stop string), ${ids.length} tokens`, us: detok },
    { name: `detokenize, the same ${long.length} tokens long`, us: detokLong },
    { name: 'constraint mask + accept (any-text grammar)', us: mask },
    { name: 'SSE event encode (JSON per token)', us: sse },
  ];
}

async function startDaemon(): Promise<{ d: Orchard; dataDir: string }> {
  const dataDir = mkdtempSync(join(os.tmpdir(), 'orchard-bench-api-'));
  const modelDir = join(dataDir, 'models', ...REPO.split('/'));
  mkdirSync(modelDir, { recursive: true });
  cpSync(DEMO, modelDir, { recursive: true });
  const options = resolveOptions({ dataDir, listen: ['/ip4/127.0.0.1/tcp/0'], bootstrap: [], apiPort: 0, mdns: false, ...(process.env.BENCH_THREADS ? { engineThreads: THREADS } : {}) } as never);
  const d = await startOrchard(options, pino({ level: 'silent' }), { dashboard: false });
  return { d, dataDir };
}

const cpuOf = processCpuSeconds;

/** This process's runner processes, by pid. */
function runnerPids(): number[] {
  return readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        const f = readFileSync(`/proc/${p}/stat`, 'utf8');
        return Number(f.slice(f.lastIndexOf(')') + 2).split(' ')[1]) === process.pid && readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('runner-main');
      } catch {
        return false;
      }
    })
    .map(Number);
}

/**
 * CPU time per token of each process while `f` streams `tokens()` tokens, microseconds: CPU time, unlike
 * wall time, hardly moves with the load of the other sessions on the machine.
 */
async function cpuPerToken(pids: Record<string, number>, f: () => Promise<number>): Promise<Record<string, number>> {
  const before = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuOf(pid)]));
  const self0 = process.cpuUsage();
  const tokens = await f();
  const self = process.cpuUsage(self0);
  const out: Record<string, number> = { self: ((self.user + self.system) / tokens) };
  for (const [k, pid] of Object.entries(pids)) out[k] = ((cpuOf(pid) - before[k]) * 1e6) / tokens;
  return out;
}

/** Median and range of per-round values, as text. */
function spread(xs: number[]): string {
  const v = [...xs].sort((a, b) => a - b);
  return `${v[v.length >> 1].toFixed(2)}x (rounds ${v[0].toFixed(2)}-${v[v.length - 1].toFixed(2)})`;
}

export async function printApiLines(): Promise<void> {
  const tok = loadTokenizer(DEMO);
  const promptIds = tok.encode(PROMPT);
  const model = loadInProcessModel(DEMO, { backend: () => createWasmBackend({ threads: THREADS }), maxSeqLen: 128 });
  let ids: number[] = [];
  const engineOnce = async () => {
    const stamps: number[] = [];
    ids = (await generate(model, promptIds, { maxTokens: TOKENS, stopTokenIds: [256], onToken: () => void stamps.push(performance.now()) })).tokens;
    return stamps;
  };
  const inst = await startLocalInstance({ modelDir: DEMO, layout: { stages: pipelineStages(4, 1), tensor: 1 }, groupId: 'bench-api-runner', secret: '22'.repeat(16), listenHost: '127.0.0.1', maxSeqLen: 128, backend: { kind: 'wasm', threads: THREADS }, batch: { sequences: 8, prefixCacheBytes: 0 } });
  const runnerOnce = async (p = promptIds) => {
    const stamps: number[] = [];
    await inst[0].generate({ promptIds: p, maxTokens: TOKENS, stopTokenIds: [256] }, () => void stamps.push(performance.now()));
    return stamps;
  };
  const shard = loadShard(DEMO, { layers: [0, 4], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend: createWasmBackend({ threads: THREADS }), maxSeqLen: 160, maxBatch: 64 });
  const eightPrompts = Array.from({ length: 8 }, (_, i) => promptIds.slice(0, 30 + i));
  // With more threads than one, the same steps on one thread: what the kernels' worker threads do to a batch of this model.
  const shard1 = THREADS > 1 ? loadShard(DEMO, { layers: [0, 4], tensor: { rank: 0, size: 1 }, embed: true, head: true }, { backend: createWasmBackend({ threads: 1 }), maxSeqLen: 160, maxBatch: 64 }) : null;
  const { d, dataDir } = await startDaemon();
  const cpu: Record<string, number> = {};
  const r = { engine: [] as number[], runner: [] as number[], api: [] as number[], runner8: [] as number[], api1: [] as number[], api8: [] as number[], engineStep1: [] as number[], engineStep8: [] as number[], oneThread1: [] as number[], oneThread8: [] as number[] };
  try {
    // Warm-up: kernels compiled, the daemon's instance loaded (its first request waits for it).
    await engineOnce();
    await runnerOnce();
    const first = await streamOnce(d, PROMPT);
    for (let round = 0; round < ROUNDS; round++) {
      // One after another in each round, so a load change on the shared machine hits them alike.
      r.engine.push(await repeated(engineOnce));
      r.runner.push(await repeated(runnerOnce));
      r.api.push(
        await repeated(async () => {
          const s = await streamOnce(d, PROMPT);
          if (s.text !== first.text) throw new Error('api-stream: two greedy streams of one prompt differ');
          return s.stamps;
        }),
      );
      r.runner8.push(overlapRate(await Promise.all(Array.from({ length: 8 }, (_, i) => runnerOnce(promptIds.slice(0, 30 + i))))));
      r.api1.push(await repeated(async () => (await streamOnce(d, PROMPT.slice(0, 33))).stamps));
      r.api8.push(await eightStreams(d));
      let one = 0;
      for (let k = 0; k < REPEAT; k++) one += (await engineSteps(shard, [eightPrompts[3]])) / REPEAT;
      r.engineStep1.push(one);
      r.engineStep8.push(await engineSteps(shard, eightPrompts));
      if (shard1) {
        let one1 = 0;
        for (let k = 0; k < REPEAT; k++) one1 += (await engineSteps(shard1, [eightPrompts[3]])) / REPEAT;
        r.oneThread1.push(one1);
        r.oneThread8.push(await engineSteps(shard1, eightPrompts));
      }
    }
    // CPU per token: the runner alone, then the daemon's runner and the daemon (with this client) streaming.
    const runnerPid = inst[0].child.pid!;
    const daemonRunner = runnerPids().find((p) => p !== runnerPid)!;
    const count = (f: () => Promise<number[]>) => async () => {
      let n = 0;
      for (let k = 0; k < 2 * REPEAT; k++) n += (await f()).length;
      return n;
    };
    const count8 = (f: (i: number) => Promise<number[]>) => async () => {
      let n = 0;
      for (let k = 0; k < 2; k++) n += (await Promise.all(Array.from({ length: 8 }, (_, i) => f(i)))).reduce((a, x) => a + x.length, 0);
      return n;
    };
    cpu.engine = (await cpuPerToken({}, count(engineOnce))).self;
    cpu.runner = (await cpuPerToken({ runner: runnerPid }, count(() => runnerOnce()))).runner;
    const api = await cpuPerToken({ runner: daemonRunner }, count(async () => (await streamOnce(d, PROMPT)).stamps));
    cpu.apiRunner = api.runner;
    cpu.apiDaemon = api.self;
    const api8 = await cpuPerToken({ runner: daemonRunner }, count8(async (i) => (await streamOnce(d, PROMPT.slice(0, 30 + i))).stamps));
    cpu.api8Runner = api8.runner;
    cpu.api8Daemon = api8.self;
    cpu.runner8 = (await cpuPerToken({ runner: runnerPid }, count8((i) => runnerOnce(promptIds.slice(0, 30 + i))))).runner;
    // The same streams from a client on a worker thread: the daemon's share apart from the client's.
    const split1 = await daemonAndClientCpu(d, Array.from({ length: 2 * REPEAT }, () => [PROMPT]));
    const split8 = await daemonAndClientCpu(d, Array.from({ length: 2 }, () => Array.from({ length: 8 }, (_, i) => PROMPT.slice(0, 30 + i))));
    Object.assign(cpu, { apiDaemonAlone: split1.daemon, apiClient: split1.client, api8DaemonAlone: split8.daemon, api8Client: split8.client });
    // The engine's own steps of one and of 8 sequences (each prompt's prefill, then the decode steps): what batching saves per token on this model.
    const steps = (prompts: number[][]) => async () => {
      for (let k = 0; k < 2; k++) await engineSteps(shard, prompts);
      return 2 * (TOKENS - 1) * prompts.length;
    };
    cpu.engineStep1 = (await cpuPerToken({}, steps([eightPrompts[3]]))).self;
    cpu.engineStep8 = (await cpuPerToken({}, steps(eightPrompts))).self;
  } finally {
    await d.stop();
    await Promise.all(inst.map((x) => x.stop(1000)));
    rmSync(dataDir, { recursive: true, force: true });
  }
  const load = os.loadavg()[0].toFixed(2);
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const per = (a: number[], b: number[]) => a.map((x, i) => x / b[i]);
  const line = (name: string, v: number[], base: number[], what: string, target?: number) => {
    const m = med(per(v, base));
    console.log(`${name.padEnd(44)} ${med(v).toFixed(0).padStart(7)} tok/s  ${spread(per(v, base))} ${what}${target ? `  (target >= ${target}x: ${m >= target ? 'met' : 'NOT met'})` : ''}`);
  };
  console.log(`serving path on models/orchard-demo (${THREADS} threads, ${TOKENS}-token streams x ${REPEAT} per sample, ${ROUNDS} interleaved rounds, medians; load average ${load}):`);
  line('engine alone (in process)', r.engine, r.engine, 'engine');
  line('runner alone (runner process, IPC)', r.runner, r.engine, 'engine');
  line('api-stream (OpenAI SSE, in-process daemon)', r.api, r.engine, 'engine', 0.9);
  line('runner alone, 8 concurrent (summed)', r.runner8, r.runner, 'runner one at a time');
  line('api one stream (8-stream prompt length)', r.api1, r.api1, 'one');
  line('api-batch-8 (8 concurrent, summed)', r.api8, r.api1, 'api one at a time', 3);
  line('engine one sequence, forwardBatch loop', r.engineStep1, r.engineStep1, 'one');
  line('engine-batch-8 (8 sequences per forwardBatch)', r.engineStep8, r.engineStep1, 'engine one sequence: the ceiling of api-batch-8');
  line('api-batch-8 against engine-batch-8', r.api8, r.engineStep8, 'engine 8 sequences');
  if (shard1) {
    line('engine one sequence, 1 thread', r.oneThread1, r.engineStep1, `engine one sequence (${THREADS} threads)`);
    line('engine-batch-8, 1 thread', r.oneThread8, r.engineStep8, `engine-batch-8 (${THREADS} threads)`);
    line('engine-batch-8, 1 thread, against one sequence', r.oneThread8, r.oneThread1, 'engine one sequence, 1 thread');
  }
  const us = (xs: number[]) => 1e6 / med(xs);
  console.log('per-token time by stage (us/token, from the medians):');
  console.log(`  ${'engine decode step'.padEnd(52)} ${us(r.engine).toFixed(1).padStart(7)}`);
  console.log(`  ${'runner process + IPC (runner - engine)'.padEnd(52)} ${(us(r.runner) - us(r.engine)).toFixed(1).padStart(7)}`);
  console.log(`  ${'daemon: executor, HTTP, SSE, client (api - runner)'.padEnd(52)} ${(us(r.api) - us(r.runner)).toFixed(1).padStart(7)}`);
  console.log('CPU time per token by process (us/token; wall-time ratios above swing with the machine\'s load, these hardly do):');
  const c = (name: string, v: number) => console.log(`  ${name.padEnd(52)} ${v.toFixed(1).padStart(7)}`);
  c('engine alone (this process, all threads)', cpu.engine);
  c('runner alone, one stream (runner process)', cpu.runner);
  c('api, one stream: the daemon\'s runner process', cpu.apiRunner);
  c('api, one stream: daemon + in-process client', cpu.apiDaemon);
  c('runner alone, 8 streams (runner process)', cpu.runner8);
  c('api, 8 streams: the daemon\'s runner process', cpu.api8Runner);
  c('api, 8 streams: daemon + in-process client', cpu.api8Daemon);
  c('api, one stream: the daemon alone (client on a thread)', cpu.apiDaemonAlone);
  c('api, one stream: that client thread', cpu.apiClient);
  c('api, 8 streams: the daemon alone (client on a thread)', cpu.api8DaemonAlone);
  c('api, 8 streams: that client thread', cpu.api8Client);
  c('engine alone, one sequence (forwardBatch loop)', cpu.engineStep1);
  c('engine alone, 8 sequences per forwardBatch', cpu.engineStep8);
  console.log('daemon-side stages replayed alone on the engine\'s tokens (us/token):');
  for (const s of await stageCosts(ids)) console.log(`    ${s.name.padEnd(50)} ${Number.isNaN(s.us) ? '   n/a' : s.us.toFixed(2).padStart(7)}`);
  console.log(`load average after the api lines: ${os.loadavg()[0].toFixed(2)}`);
}
