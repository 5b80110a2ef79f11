/**
 * `pnpm bench:serve`: decode tokens/s of one generated model (tens of millions of parameters) served
 * by runner processes over the loopback TCP data plane, in one run:
 *   - one process (the baseline),
 *   - a 2-stage pipeline on 2 processes,
 *   - tensor parallel 2 on 2 processes,
 * each runner with 1 engine thread (BENCH_THREADS) (wasm SIMD kernels; BENCH_BACKEND=reference for the plain ones). Prints ratios against the baseline.
 * Targets (issue 6): pipeline >= 0.9x single, tensor parallel >= 1.7x single.
 * Batching lines (issue 18), on the one-process instance (it batches its sequences, runner/batch-driver.ts):
 *   - batch-8-throughput: 8 concurrent streams' summed decode tok/s against one stream alone, same run
 *     (target >= 3x); pipeline-batch-8-throughput and tensor-batch-8-throughput the same on the 2-process
 *     split instances (they batch too, runner/driver.ts), each against its own single stream;
 *   - prefix-turn-2-ttft: a chat's second turn (the first turn's BENCH_HISTORY-token prompt, its answer
 *     and 8 new tokens) against the first turn's time to first token (target <= 0.2x);
 *   - itl-during-prefill: p99 inter-token time of a running stream while a BENCH_LONG_PROMPT-token
 *     (2,000) prompt is prefilled beside it, against the same stream's undisturbed p99 over the same
 *     positions (run again alone; its p99 just before the prompt is printed too)
 *     (target <= 2x; the driver chunks the prompt from measured step times, runner/prefill-chunk.ts).
 * BENCH_PARTS=batch runs only these (a short run); BENCH_PARTS=itl only itl-during-prefill.
 * BENCH_THREADS=n gives every runner n engine threads (default 1; the daemon's own default is the cores
 * divided among the ranks on a machine). With 2 on this 2-core VM one stream gets faster too (more memory
 * reads in flight), so batch-8-throughput moved only 2.25 -> 2.38x.
 * Speculation (issue 18), BENCH_PARTS=spec, on the one-process instance:
 *   - spec-decode-repetitive: prompt-lookup speculation against plain decode of the same prompt, same
 *     run, outputs compared (the bench throws if they differ), acceptance printed (target >= 1.5x). The
 *     prompt is text whose continuation repeats it, made from the model's own greedy output: the seed
 *     prompt and its continuation up to where the output has cycled twice (a random model's greedy
 *     output falls into a cycle);
 *   - pipeline-spec-decode-repetitive: the same prompt on the 2-process pipeline (split instances speculate);
 *   - spec-decode-non-repetitive: the same on a prompt of ids that do not repeat, sampled (temperature 1,
 *     seeded, so both runs give the same tokens: little to draft) and greedy (the output repeats itself
 *     in parts: drafts partly rejected, the draft length adapting): what speculation costs there;
 *   - spec-decode-draft: speculation with a draft model (--draft-model, runner/draft-model.ts) against
 *     plain decode of the same prompt, same run, outputs compared, acceptance printed, with two drafts
 *     that bound it: the target as its own draft (every draft token confirmed, but each costs a whole
 *     target forward: the acceptance ceiling, not a speed-up) and a 1-layer hidden-256 random model of
 *     the same tokenizer (its guesses are all wrong: what a useless draft costs, the floor). A random
 *     model has no small sibling trained to agree with it, so no line here shows a real draft's gain.
 *     The draft policy counts the draft model's own time per drafted token (DraftCost, timed apart from
 *     the step): the self-draft is turned off after its first proposal (in the warm-up request; the
 *     runner's draft model keeps its timing across requests, so the measured runs draft 0/0) and its
 *     line shows what that check leaves of plain speed (target ~1.0x).
 *   - batch-8-spec-mixed: eight concurrent streams in one batch, four on the repetitive prompt (greedy) and
 *     four sampled on the non-repetitive one, prompt lookup against plain, summed tok/s, outputs compared:
 *     per-sequence draft policies in a batch that shares each step's cost (runner/step-draft-policy.ts).
 * BENCH_PARTS=draft runs only spec-decode-draft. The one-process spec lines note the runner process's CPU time plain /
 * speculative too (whole requests, least of the rounds; /proc, Linux): wall time swings with other work on
 * a shared machine far more (the same work read 0.68x and 1.22x in two runs at load 5-6).
 * The serving path (issue 35), BENCH_PARTS=api (also in the default run): API streaming against the engine
 * alone and 8 concurrent API streams against one, on models/orchard-demo, with a per-stage breakdown (serve-api.ts).
 *
 * The model: 6 layers of hidden 1024 (FFN 3072), ~75M layer parameters in f32 (BENCH_DTYPE=bf16 or f16
 * for the weights real checkpoints ship; the engine keeps them 16-bit and widens in the kernels, which
 * makes one stream faster and a batch compute-bound: batch-8-throughput 1.06-1.18x there against 1.89x
 * in f32, same machine, load 2-5). Compute dominates:
 * a TP-2 rank computes ~0.4 ms (attention) and ~1.2 ms (MLP) between its meetings with the other
 * rank, against ~50-250 us per meeting on this kind of machine. The earlier default (8 layers of
 * hidden 512, 25M) met 2.5x more often per parameter, after ~0.1 / 0.3 ms of compute each: the
 * meetings, not the maths, set its speed (BENCH_LAYERS=8 BENCH_HIDDEN=512 still runs it).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { pipelineStages, type InstanceLayout } from '@orchard/engine';
import { writeRandomModel } from '@orchard/engine/testing';
import { startLocalInstance } from '../src/runner/runner-process.js';
import type { GenerateOutcome, GenerateRequest, Speculate } from '../src/runner/requests.js';
import { measureRendezvous } from './rendezvous.js';
import { processCpuSeconds } from './proc-cpu.js';

// BENCH_PARTS=api alone needs none of the generated model below.
if (process.env.BENCH_PARTS === 'api') {
  await (await import('./serve-api.js')).printApiLines();
  process.exit(0);
}

const LAYERS = Number(process.env.BENCH_LAYERS ?? 6);
const HIDDEN = Number(process.env.BENCH_HIDDEN ?? 1024);
const TOKENS = Number(process.env.BENCH_TOKENS ?? 96);
const BACKEND = (process.env.BENCH_BACKEND ?? 'wasm') as 'wasm' | 'reference';
const THREADS = Number(process.env.BENCH_THREADS ?? 1);

const dir = mkdtempSync(join(os.tmpdir(), 'orchard-bench-serve-'));
const LONG_PROMPT = Number(process.env.BENCH_LONG_PROMPT ?? 2000);
const DTYPE = (process.env.BENCH_DTYPE ?? 'f32') as 'f32' | 'f16' | 'bf16';
const info = writeRandomModel(dir, { numLayers: LAYERS, hiddenSize: HIDDEN, intermediateSize: HIDDEN * 3, numHeads: 8, numKvHeads: 4, maxPositionEmbeddings: Math.max(512, LONG_PROMPT + 512), seed: 11, dtype: DTYPE });
const params = (LAYERS * (HIDDEN * HIDDEN * 3 + HIDDEN * HIDDEN * 3 * 3)) / 1e6;

const PROMPT = [1, 10, 20, 30, 40, 50, 60, 70];
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/**
 * Decode tokens run, unmeasured, right before each measured run. On this kind of VM two processes that
 * meet often get 2-4x quicker meetings over the first seconds of continuous exchange (raw node:net
 * sockets too; the rendezvous line shows it), and a runner that sat idle while the other configurations
 * ran starts cold again: without this, a TP-2 run measures mostly that warm-up. The cold speed is
 * printed as well.
 */
const WARM_TOKENS = Number(process.env.BENCH_WARM_TOKENS ?? 96);
/**
 * Times per token the ranks of a TP-2 instance meet in an all-reduce: after o_proj and down_proj in each
 * layer. (The driver's header with the embedded row and the logit slice to the sampler go one way.)
 */
const MEETINGS = 2 * LAYERS;

/**
 * tokenIntervalMs 0: these lines time each token as it reaches this process (inter-token p99, time to
 * first token); the runner's 2 ms between token messages would round a fast configuration's steps.
 */
function launch(name: string, layout: InstanceLayout, o: { pollMs?: number; maxSeqLen?: number; batch?: { sequences: number; prefixCacheBytes: number; draftModel?: string } } = {}) {
  return startLocalInstance({ modelDir: dir, layout, groupId: `bench-${name}`, secret: '11'.repeat(16), listenHost: '127.0.0.1', maxSeqLen: 512, backend: { kind: BACKEND, threads: THREADS }, tokenIntervalMs: 0, ...o });
}

type Instance = Awaited<ReturnType<typeof launch>>;

async function decodeSpeed(runners: Instance, tokens = TOKENS): Promise<number> {
  return decodeRate(await runners[0].generate({ promptIds: PROMPT, maxTokens: tokens, stopTokenIds: [] }, () => undefined));
}

/** Decode tokens per second of one run (its first token comes from the prefill). */
function decodeRate(out: GenerateOutcome): number {
  return ((out.tokens.length - 1) * 1000) / out.decodeMs;
}

/** Best-of-rounds speeds of plain and speculative decode of one prompt, and the last run's acceptance. */
interface SpecBest {
  plain: number;
  spec: number;
  accepted: number;
  drafted: number;
  /** Least CPU seconds of the instance's processes over a plain / speculative request (prefill included), when timed. */
  plainCpu?: number;
  specCpu?: number;
}

/** The CPU seconds so far of an instance's runner processes (Linux; NaN elsewhere). */
function instanceCpu(inst: { child: { pid?: number } }[]): () => number {
  return () => inst.reduce((a, r) => a + processCpuSeconds(r.child.pid), 0);
}

/**
 * A note on plain / speculative CPU time of the runner processes, whole requests: wall-time best-of-
 * rounds swings with other work on a shared machine (the same work read 0.68x and 1.22x in two runs),
 * CPU time far less.
 */
function cpuNote(b: SpecBest): string {
  return b.plainCpu && b.specCpu && Number.isFinite(b.plainCpu / b.specCpu) ? `; CPU time plain / speculative ${(b.plainCpu / b.specCpu).toFixed(2)}x` : '';
}

/**
 * One round: `prompt` decoded plainly, then with speculation (`mode`; `o` for both); the outputs
 * must be equal (the bench throws naming `line` otherwise); the speeds go into `best`.
 */
async function plainThenSpeculative(gen: (promptIds: number[], o?: Partial<GenerateRequest>) => Promise<GenerateOutcome>, prompt: number[], o: Partial<GenerateRequest>, best: SpecBest, line: string, mode: Speculate = 'prompt-lookup', cpu?: () => number): Promise<void> {
  const c0 = cpu?.() ?? NaN;
  const plain = await gen(prompt, o);
  const c1 = cpu?.() ?? NaN;
  const spec = await gen(prompt, { ...o, speculate: mode });
  const c2 = cpu?.() ?? NaN;
  if (cpu) {
    best.plainCpu = Math.min(best.plainCpu ?? Infinity, c1 - c0);
    best.specCpu = Math.min(best.specCpu ?? Infinity, c2 - c1);
  }
  if (spec.tokens.join() !== plain.tokens.join()) throw new Error(`${line}: speculation changed the output\nplain ${plain.tokens}\nspec  ${spec.tokens}`);
  best.plain = Math.max(best.plain, decodeRate(plain));
  best.spec = Math.max(best.spec, decodeRate(spec));
  ({ accepted: best.accepted, drafted: best.drafted } = spec.speculation!);
}

/** Decode speed of a run that follows an unmeasured warm-up run on the same instance(s). */
async function warmSpeed(runners: Instance): Promise<number> {
  await decodeSpeed(runners, WARM_TOKENS);
  return decodeSpeed(runners);
}

/**
 * All configurations stay up (idle runners sleep on their sockets) and are measured in
 * alternating rounds, best round each, so a load change on a shared machine hits them alike.
 */
async function measureAll() {
  const configs = {
    single: await launch('single', { stages: pipelineStages(LAYERS, 1), tensor: 1 }),
    singleB: await launch('single-b', { stages: pipelineStages(LAYERS, 1), tensor: 1 }),
    pipe: await launch('pipeline', { stages: pipelineStages(LAYERS, 2), tensor: 1 }),
    tensor: await launch('tensor', { stages: pipelineStages(LAYERS, 1), tensor: 2 }),
    // The same without the runners' brief polling at each meeting (they sleep on their sockets).
    tensorSleep: await launch('tensor-sleep', { stages: pipelineStages(LAYERS, 1), tensor: 2 }, { pollMs: 0 }),
  };
  try {
    const best = { single: 0, pipe: 0, tensor: 0, tensorCold: 0, tensorSleep: 0, both: 0, pipe2: 0, ceiling: 0, waitMs: Infinity };
    for (const r of Object.values(configs)) await r[0].generate({ promptIds: PROMPT, maxTokens: 4, stopTokenIds: [] }, () => undefined); // loads, JIT
    for (let round = 0; round < ROUNDS; round++) {
      // Cold: the TP ranks have sat idle since the previous round.
      best.tensorCold = Math.max(best.tensorCold, await decodeSpeed(configs.tensor));
      for (const k of ['single', 'pipe', 'tensor', 'tensorSleep'] as const) best[k] = Math.max(best[k], await warmSpeed(configs[k]));
      // What the TP ranks' meetings cost in this round: two processes doing a TP-2 rank's share of the
      // single's time between all-reduces (no model), the waits added to half the single's time.
      const halfMs = 1000 / best.single / 2;
      const waitMs = await measureRendezvous(halfMs / MEETINGS, MEETINGS * TOKENS, HIDDEN, MEETINGS * WARM_TOKENS);
      best.waitMs = Math.min(best.waitMs, waitMs);
      best.ceiling = Math.max(best.ceiling, 1000 / (halfMs + MEETINGS * waitMs));
      // Parallel headroom: two independent single processes decoding at the same time, summed.
      const [x, y] = await Promise.all([warmSpeed(configs.single), warmSpeed(configs.singleB)]);
      best.both = Math.max(best.both, x + y);
      // Two streams at once on the pipeline: while one stage computes one stream's token, the other computes the other's.
      const [p, q] = await Promise.all([warmSpeed(configs.pipe), warmSpeed(configs.pipe)]);
      best.pipe2 = Math.max(best.pipe2, p + q);
    }
    return best;
  } finally {
    await Promise.all(Object.values(configs).flat().map((r) => r.stop(1000)));
  }
}

/** Time from sending a request to its first token, ms, and the outcome. */
async function ttft(runners: Instance, promptIds: number[], maxTokens: number) {
  const t0 = performance.now();
  let first = 0;
  const out = await runners[0].generate({ promptIds, maxTokens, stopTokenIds: [] }, () => void (first ||= performance.now()));
  return { ms: first - t0, out };
}

/** Continuous batching and the prefix cache on the one-process instance, best of ROUNDS each. */
/**
 * Eight streams start together on `inst`. Their summed decode rate counts the tokens stamped while all
 * eight decode: from the last stream's first token to the first stream's last token. (Before and after
 * that window fewer streams run: the others' prompts are still being fed, chunked beside the first
 * ones' decoding, or they have finished.)
 */
async function eightStreams(inst: Instance): Promise<number> {
  const stamps: number[][] = Array.from({ length: 8 }, () => []);
  await Promise.all(
    Array.from({ length: 8 }, (_, i) =>
      inst[0].generate({ promptIds: PROMPT.map((t) => (t + i) % 256), maxTokens: TOKENS, stopTokenIds: [] }, () => void stamps[i].push(performance.now())),
    ),
  );
  const from = Math.max(...stamps.map((s) => s[0]));
  const to = Math.min(...stamps.map((s) => s[s.length - 1]));
  const inWindow = stamps.reduce((a, s) => a + s.filter((t) => t > from && t <= to).length, 0);
  if (to - from < 0.5 * Math.max(...stamps.map((s) => s[s.length - 1] - s[0]))) throw new Error(`batch-8-throughput: the eight streams overlapped for only ${(to - from).toFixed(0)} ms; raise BENCH_TOKENS`);
  return (inWindow * 1000) / (to - from);
}

/**
 * Split instances batch too (driver.ts): 8 streams against one stream on the same 2-process
 * pipeline and tensor-parallel instances, best of rounds each.
 */
async function measureSplitBatching() {
  const batch = { sequences: 8, prefixCacheBytes: 0 };
  const pipe = await launch('pipeline-batch', { stages: pipelineStages(LAYERS, 2), tensor: 1 }, { batch });
  const tensor = await launch('tensor-batch', { stages: pipelineStages(LAYERS, 1), tensor: 2 }, { batch });
  try {
    for (const r of [pipe, tensor]) await r[0].generate({ promptIds: PROMPT, maxTokens: 4, stopTokenIds: [] }, () => undefined); // loads, JIT
    const best = { pipeOne: 0, pipeEight: 0, tensorOne: 0, tensorEight: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      best.pipeOne = Math.max(best.pipeOne, await warmSpeed(pipe));
      best.pipeEight = Math.max(best.pipeEight, await eightStreams(pipe));
      best.tensorOne = Math.max(best.tensorOne, await warmSpeed(tensor));
      best.tensorEight = Math.max(best.tensorEight, await eightStreams(tensor));
    }
    return best;
  } finally {
    await Promise.all([...pipe, ...tensor].map((r) => r.stop(1000)));
  }
}

async function measureBatching() {
  const single = await launch('batch', { stages: pipelineStages(LAYERS, 1), tensor: 1 });
  try {
    await single[0].generate({ promptIds: PROMPT, maxTokens: 4, stopTokenIds: [] }, () => undefined); // loads, JIT
    const best = { one: 0, eight: 0, turn1Ms: Infinity, turn2Ms: Infinity, cached: 0, history: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      best.one = Math.max(best.one, await warmSpeed(single));
      best.eight = Math.max(best.eight, await eightStreams(single));
      // A new conversation each round (different first tokens), so turn 1 is always cold.
      const history = Array.from({ length: HISTORY }, (_, j) => (round * 101 + j * 7 + 3) % 256);
      const turn1 = await ttft(single, history, 8);
      const turn2 = await ttft(single, [...history, ...turn1.out.tokens, 5, 6, 7, 8, 9, 10, 11, 12], 8);
      best.turn1Ms = Math.min(best.turn1Ms, turn1.ms);
      best.turn2Ms = Math.min(best.turn2Ms, turn2.ms);
      best.cached = turn2.out.cachedPromptTokens ?? 0;
      best.history = history.length + turn1.out.tokens.length + 8;
    }
    return best;
  } finally {
    await Promise.all(single.map((r) => r.stop(1000)));
  }
}

/** The q-th quantile of `xs` (nearest rank). */
function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
}

/**
 * A stream decodes UNDISTURBED tokens alone, then a LONG_PROMPT-token prompt arrives: the stream's
 * inter-token times while that prompt is prefilled (until its first token). The prefill takes as many
 * steps as it has gaps (chunks sized so each step stays near 1.75x a decode step), so the stream grows by
 * ~2,000 tokens meanwhile and its own attention slows: the target's baseline is the same stream run again
 * alone over the same positions (greedy: the same tokens), its gaps at the same token indices. Printed
 * too: its undisturbed gaps just before the prompt (short context) and just after.
 */
async function measureItlDuringPrefill() {
  const inst = await launch('itl', { stages: pipelineStages(LAYERS, 1), tensor: 1 }, { maxSeqLen: LONG_PROMPT + 512 });
  const UNDISTURBED = 128;
  try {
    await inst[0].generate({ promptIds: PROMPT, maxTokens: 8, stopTokenIds: [] }, () => undefined); // loads, JIT
    const stamps: number[] = [];
    let alone: () => void = () => {};
    const aloneDone = new Promise<void>((r) => (alone = r));
    const stopA = new AbortController();
    let stopAt = Infinity;
    const runA = inst[0].generate({ promptIds: PROMPT, maxTokens: LONG_PROMPT + 512 - PROMPT.length - 1, stopTokenIds: [] }, () => {
      stamps.push(performance.now());
      if (stamps.length === UNDISTURBED + 8) alone();
      if (stamps.length >= stopAt) stopA.abort();
    }, stopA.signal);
    await aloneDone;
    const arrived = performance.now();
    const long = Array.from({ length: LONG_PROMPT }, (_, j) => (j * 13 + 5) % 256);
    const b = await ttft(inst, long, 1);
    const firstB = arrived + b.ms;
    stopAt = stamps.length + UNDISTURBED + 1;
    const outA = await runA;
    if (outA.finishReason !== 'abort') throw new Error('itl-during-prefill: the stream ended before its undisturbed tail');
    const gaps = (from: number, to: number) => stamps.slice(1).map((t, i) => [stamps[i], t - stamps[i]]).filter(([t0]) => t0 >= from && t0 < to).map(([, g]) => g);
    // undisturbed: the gaps after the first 8 tokens (warm) until the prompt arrived
    const before = gaps(stamps[7], arrived);
    const during = gaps(arrived, firstB);
    // after: from the first gap that starts once B has its token
    const after = gaps(firstB, Infinity);
    // the same positions undisturbed: gap i runs from token i to i + 1; the prefill's gaps are [first, last)
    const first = stamps.findIndex((t) => t >= arrived);
    const last = stamps.findIndex((t) => t >= firstB);
    const again: number[] = [];
    await inst[0].generate({ promptIds: PROMPT, maxTokens: last + 1, stopTokenIds: [] }, () => void again.push(performance.now()));
    const same = again.slice(first + 1, last + 1).map((t, i) => t - again[first + i]);
    return { beforeP99: quantile(before, 0.99), afterP99: quantile(after, 0.99), duringP99: quantile(during, 0.99), sameP99: quantile(same, 0.99), beforeP50: quantile(before, 0.5), afterP50: quantile(after, 0.5), duringP50: quantile(during, 0.5), sameP50: quantile(same, 0.5), beforeN: before.length, afterN: after.length, duringN: during.length, sameN: same.length, prefillMs: b.ms };
  } finally {
    await Promise.all(inst.map((r) => r.stop(1000)));
  }
}

/**
 * The longest stretch of `out` that repeats itself with a period of 2..32 tokens, at least 3 periods long
 * (a period of 1 — one token over and over — is left out: it makes drafting trivial).
 */
function periodicStretch(out: number[]): { start: number; period: number; length: number } | null {
  let best: { start: number; period: number; length: number } | null = null;
  for (let period = 2; period <= 32; period++) {
    for (let i = 0, run = 0; i + period < out.length; i++) {
      run = out[i] === out[i + period] ? run + 1 : 0;
      const length = run + period;
      if (run > 0 && length >= 3 * period && length > (best?.length ?? 0) && primitive(out.slice(i - run + 1, i - run + 1 + period))) best = { start: i - run + 1, period, length };
    }
  }
  return best;
}

/** Whether `block` is not a shorter block repeated (1 1 is 1 twice; 3 5 3 5 is 3 5 twice). */
function primitive(block: number[]): boolean {
  const p = block.length;
  for (let d = 1; d < p; d++) if (p % d === 0 && block.every((t, k) => t === block[(k + d) % p])) return false;
  return true;
}

/** Seed prompts tried when looking for a repetitive prompt. */
const SPEC_SEEDS = 6;
/** Greedy tokens generated from each seed prompt to look for a stretch that repeats. */
const SPEC_PROBE = 320;

/** Plain decode against prompt-lookup speculation of the same prompts on the one-process instance, best of ROUNDS each. */
async function measureSpeculation() {
  const inst = await launch('spec', { stages: pipelineStages(LAYERS, 1), tensor: 1 });
  try {
    const gen = (promptIds: number[], o: Partial<GenerateRequest> = {}) => inst[0].generate({ promptIds, maxTokens: TOKENS, stopTokenIds: [], ...o }, () => undefined);
    await gen(PROMPT, { maxTokens: 4 }); // loads, JIT
    // Text that repeats its prompt, from the model's own greedy output: of a few seed prompts, the one whose
    // output holds the longest stretch that repeats itself; the prompt is that seed and its output up to
    // the stretch's second period, so the continuation goes on repeating what the prompt holds.
    let pick: { seed: number[]; i: number; out: number[]; stretch: NonNullable<ReturnType<typeof periodicStretch>> } | null = null;
    for (let i = 0; i < SPEC_SEEDS; i++) {
      const seed = PROMPT.map((t) => (t + 17 * i) % 256);
      const out = (await gen(seed, { maxTokens: SPEC_PROBE })).tokens;
      const stretch = periodicStretch(out);
      if (stretch && stretch.length > (pick?.stretch.length ?? 0)) pick = { seed, i, out, stretch };
    }
    if (!pick) throw new Error(`spec-decode-repetitive: no seed prompt's greedy output repeats itself within ${SPEC_PROBE} tokens`);
    const { stretch } = pick;
    const upTo = stretch.start + 2 * stretch.period;
    const repetitive = [...pick.seed, ...pick.out.slice(0, upTo)];
    const made = `seed prompt ${pick.i} of ${SPEC_SEEDS} (${PROMPT.length} ids) and its first ${upTo} greedy tokens: its output repeats a ${stretch.period}-token period for ${stretch.length} tokens from token ${stretch.start} (the longest such stretch of the ${SPEC_SEEDS} seeds' first ${SPEC_PROBE} tokens), and the prompt ends after that period's second time`;
    const other = Array.from({ length: 64 }, (_, j) => (j * 29 + 3) % 256);
    const sampled = { temperature: 1, seed: 7 };
    const best: SpecBest = { plain: 0, spec: 0, accepted: 0, drafted: 0 };
    const others: (SpecBest & { name: string; o: Partial<GenerateRequest> })[] = [
      { name: 'sampled', o: sampled, plain: 0, spec: 0, accepted: 0, drafted: 0 },
      { name: 'greedy', o: {}, plain: 0, spec: 0, accepted: 0, drafted: 0 },
    ];
    for (let round = 0; round < ROUNDS; round++) {
      await plainThenSpeculative(gen, repetitive, {}, best, 'spec-decode-repetitive', 'prompt-lookup', instanceCpu(inst));
      for (const x of others) await plainThenSpeculative(gen, other, x.o, x, `spec-decode-non-repetitive (${x.name})`, 'prompt-lookup', instanceCpu(inst));
    }
    return { ...best, others, made, repetitive, other, promptTokens: repetitive.length, otherTokens: other.length };
  } finally {
    await Promise.all(inst.map((r) => r.stop(1000)));
  }
}

/**
 * The same repetitive prompt on the 2-process pipeline (split instances speculate too, driver.ts):
 * the draft rows cross the stage boundary with the token row, so a step confirms several tokens for
 * one trip through the pipeline. Plain against speculative, same run, outputs compared.
 */
async function measurePipelineSpeculation(repetitive: number[]) {
  const inst = await launch('spec-pipeline', { stages: pipelineStages(LAYERS, 2), tensor: 1 }, { batch: { sequences: 8, prefixCacheBytes: 0 } });
  try {
    const gen = (promptIds: number[], o: Partial<GenerateRequest> = {}) => inst[0].generate({ promptIds, maxTokens: TOKENS, stopTokenIds: [], ...o }, () => undefined);
    await gen(repetitive, { maxTokens: 4 }); // loads, JIT
    const best: SpecBest = { plain: 0, spec: 0, accepted: 0, drafted: 0 };
    for (let round = 0; round < ROUNDS; round++) await plainThenSpeculative(gen, repetitive, {}, best, 'pipeline-spec-decode-repetitive');
    return best;
  } finally {
    await Promise.all(inst.map((r) => r.stop(1000)));
  }
}

/**
 * Plain decode against draft-model speculation of PROMPT on one-process instances whose runner holds
 * the draft (`self`: the target's own directory; `small`: a 1-layer random model of the same
 * tokenizer), best of ROUNDS each.
 */
async function measureDraftSpeculation() {
  const smallDir = join(dir, 'draft-small');
  writeRandomModel(smallDir, { numLayers: 1, hiddenSize: 256, intermediateSize: 768, numHeads: 4, numKvHeads: 2, maxPositionEmbeddings: Math.max(512, LONG_PROMPT + 512), seed: 12, dtype: DTYPE });
  const out: (SpecBest & { name: string })[] = [];
  for (const [name, draftModel] of [
    ['the target as its own draft', dir],
    ['a 1-layer hidden-256 random draft', smallDir],
  ]) {
    const inst = await launch(`spec-draft-${out.length}`, { stages: pipelineStages(LAYERS, 1), tensor: 1 }, { batch: { sequences: 8, prefixCacheBytes: 0, draftModel } });
    try {
      const gen = (promptIds: number[], o: Partial<GenerateRequest> = {}) => inst[0].generate({ promptIds, maxTokens: TOKENS, stopTokenIds: [], ...o }, () => undefined);
      await gen(PROMPT, { maxTokens: 4, speculate: 'draft' }); // loads, JIT
      const best: SpecBest & { name: string } = { name, plain: 0, spec: 0, accepted: 0, drafted: 0 };
      for (let round = 0; round < ROUNDS; round++) await plainThenSpeculative(gen, PROMPT, {}, best, `spec-decode-draft (${name})`, 'draft', instanceCpu(inst));
      out.push(best);
    } finally {
      await Promise.all(inst.map((r) => r.stop(1000)));
    }
  }
  return out;
}

/**
 * Eight concurrent streams on the one-process batching instance, plain against prompt lookup, same run:
 * four greedy on the repetitive prompt and four sampled (temperature 1, seeds 1-4) on the prompt that
 * does not repeat, so one batch holds sequences whose drafts pay and sequences with nothing to draft
 * (each sequence's draft policy is its own; the step they share is timed once, step-draft-policy.ts).
 * Summed tokens per wall second from the first request to the last answer (prefill included, the same
 * in both), best of ROUNDS alternating rounds; every stream's output compared.
 */
async function measureBatchSpeculation(repetitive: number[], other: number[]) {
  const inst = await launch('spec-batch', { stages: pipelineStages(LAYERS, 1), tensor: 1 }, { batch: { sequences: 8, prefixCacheBytes: 0 } });
  try {
    const reqs: Partial<GenerateRequest>[] = [
      ...[0, 1, 2, 3].map(() => ({ promptIds: repetitive })),
      ...[1, 2, 3, 4].map((seed) => ({ promptIds: other, temperature: 1, seed })),
    ];
    const all = async (speculate: Speculate) => {
      const t0 = performance.now();
      const outs = await Promise.all(reqs.map((r) => inst[0].generate({ promptIds: r.promptIds!, maxTokens: TOKENS, stopTokenIds: [], ...r, speculate }, () => undefined)));
      return { outs, rate: (outs.reduce((a, o) => a + o.tokens.length, 0) * 1000) / (performance.now() - t0) };
    };
    await all('off'); // loads, JIT
    const best = { plain: 0, spec: 0, repetitive: { accepted: 0, drafted: 0 }, other: { accepted: 0, drafted: 0 } };
    for (let round = 0; round < ROUNDS; round++) {
      const plain = await all('off');
      const spec = await all('prompt-lookup');
      spec.outs.forEach((o, i) => {
        if (o.tokens.join() !== plain.outs[i].tokens.join()) throw new Error(`batch-8-spec-mixed: speculation changed stream ${i}'s output`);
      });
      best.plain = Math.max(best.plain, plain.rate);
      best.spec = Math.max(best.spec, spec.rate);
      const sum = (list: GenerateOutcome[]) => list.reduce((a, o) => ({ accepted: a.accepted + o.speculation!.accepted, drafted: a.drafted + o.speculation!.drafted }), { accepted: 0, drafted: 0 });
      best.repetitive = sum(spec.outs.slice(0, 4));
      best.other = sum(spec.outs.slice(4));
    }
    return best;
  } finally {
    await Promise.all(inst.map((r) => r.stop(1000)));
  }
}

/** The spec-decode-draft lines. */
async function printDraftSpeculation(ratio: (name: string, v: number, unit: string, base: number, note: string) => void) {
  for (const d of await measureDraftSpeculation()) {
    ratio(`plain decode (draft-model instance)`, d.plain, 'tok/s', d.plain, 'plain');
    ratio(`spec-decode-draft`, d.spec, 'tok/s', d.plain, `plain  (${d.name}; same ${TOKENS} greedy tokens; ${d.accepted}/${d.drafted} draft tokens accepted${cpuNote(d)})`);
  }
  console.log('(spec-decode-draft: the draft runs in the driving runner on the same kernels and thread; the self-draft is the acceptance ceiling at a full target forward per draft token, the 1-layer random draft what a draft that never agrees costs)');
}

const HISTORY = Number(process.env.BENCH_HISTORY ?? 400);
const PARTS = (process.env.BENCH_PARTS ?? 'split,batch,spec,api').split(',');

try {
  console.log(`bench:serve — generated Llama, ${LAYERS} layers, hidden ${HIDDEN}, ~${params.toFixed(1)}M layer parameters (${info.dir}), ${TOKENS} decode tokens, best of ${ROUNDS} alternating rounds, each run after ${WARM_TOKENS} unmeasured tokens, ${BACKEND} backend with ${THREADS} engine thread(s) per process`);
  console.log(`machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), load average ${os.loadavg()[0].toFixed(2)}`);
  const ratio = (name: string, v: number, unit: string, base: number, note: string) => console.log(`${name.padEnd(44)} ${v.toFixed(1).padStart(7)} ${unit}  ${(v / base).toFixed(2)}x ${note}`);
  if (PARTS.includes('batch')) {
    const b = await measureBatching();
    ratio('one stream (batching instance)', b.one, 'tok/s', b.one, 'single');
    ratio('batch-8-throughput', b.eight, 'tok/s', b.one, `single  (target >= 3x: ${b.eight / b.one >= 3 ? 'met' : 'NOT met'})`);
    const split = await measureSplitBatching();
    ratio('one stream (2-stage pipeline, 2 processes)', split.pipeOne, 'tok/s', split.pipeOne, 'its single');
    ratio('pipeline-batch-8-throughput', split.pipeEight, 'tok/s', split.pipeOne, 'its single stream (2 lanes of 4: each stage busy with one while the other computes)');
    ratio('one stream (tensor parallel 2, 2 processes)', split.tensorOne, 'tok/s', split.tensorOne, 'its single');
    ratio('tensor-batch-8-throughput', split.tensorEight, 'tok/s', split.tensorOne, 'its single stream');
    ratio(`prefix-turn-1-ttft (${HISTORY}-token prompt)`, b.turn1Ms, 'ms   ', b.turn1Ms, 'turn 1');
    ratio(`prefix-turn-2-ttft (${b.history} tokens, ${b.cached} cached)`, b.turn2Ms, 'ms   ', b.turn1Ms, `turn 1  (target <= 0.2x: ${b.turn2Ms / b.turn1Ms <= 0.2 ? 'met' : 'NOT met'})`);
  }
  if (PARTS.includes('batch') || PARTS.includes('itl')) {
    const itl = await measureItlDuringPrefill();
    ratio(`itl-during-prefill undisturbed p99 (same positions, ${itl.sameN} gaps)`, itl.sameP99, 'ms   ', itl.sameP99, 'undisturbed');
    ratio(`itl-during-prefill (${LONG_PROMPT}-token prompt, ${itl.duringN} gaps)`, itl.duringP99, 'ms   ', itl.sameP99, `undisturbed  (target <= 2x: ${itl.duringP99 / itl.sameP99 <= 2 ? 'met' : 'NOT met'}; the prompt's first token after ${(itl.prefillMs / 1000).toFixed(1)} s)`);
    console.log(`(the same stream's p99 just before the prompt, ${itl.beforeN} gaps at ~${PROMPT.length + 130} tokens of context: ${itl.beforeP99.toFixed(1)} ms, ${(itl.duringP99 / itl.beforeP99).toFixed(2)}x that; just after: ${itl.afterP99.toFixed(1)} ms. Medians: before ${itl.beforeP50.toFixed(1)} / same positions ${itl.sameP50.toFixed(1)} / during ${itl.duringP50.toFixed(1)} / after ${itl.afterP50.toFixed(1)} ms)`);
    console.log(`load average after the batching lines: ${os.loadavg()[0].toFixed(2)}`);
  }
  if (PARTS.includes('api')) await (await import('./serve-api.js')).printApiLines();
  if (PARTS.includes('spec')) {
    const s = await measureSpeculation();
    console.log(`spec-decode prompt (${s.promptTokens} tokens): ${s.made}`);
    ratio('plain decode (repetitive prompt)', s.plain, 'tok/s', s.plain, 'plain');
    ratio('spec-decode-repetitive', s.spec, 'tok/s', s.plain, `plain  (target >= 1.5x: ${s.spec / s.plain >= 1.5 ? 'met' : 'NOT met'}; same ${TOKENS} tokens; ${s.accepted}/${s.drafted} draft tokens accepted${cpuNote(s)})`);
    const ps = await measurePipelineSpeculation(s.repetitive);
    ratio('pipeline-spec-decode-repetitive', ps.spec, 'tok/s', ps.plain, `plain on the 2-stage pipeline  (same prompt and tokens; ${ps.accepted}/${ps.drafted} draft tokens accepted)`);
    for (const x of s.others) {
      ratio(`plain decode (non-repetitive, ${x.name})`, x.plain, 'tok/s', x.plain, 'plain');
      ratio(`spec-decode-non-repetitive (${x.name})`, x.spec, 'tok/s', x.plain, `plain  (same tokens; ${x.accepted}/${x.drafted} draft tokens accepted${cpuNote(x)})`);
    }
    console.log(`(non-repetitive: a ${s.otherTokens}-id prompt in which no two ids repeat; sampled at temperature 1 the output gives little to draft, greedy the model's own output repeats itself in parts)`);
    const bs = await measureBatchSpeculation(s.repetitive, s.other);
    ratio('plain decode (8 streams, one batch)', bs.plain, 'tok/s', bs.plain, 'plain');
    ratio('batch-8-spec-mixed', bs.spec, 'tok/s', bs.plain, `plain  (4 repetitive greedy + 4 non-repetitive sampled streams, same tokens; ${bs.repetitive.accepted}/${bs.repetitive.drafted} and ${bs.other.accepted}/${bs.other.drafted} draft tokens accepted)`);
    await printDraftSpeculation(ratio);
    console.log(`load average after the speculation lines: ${os.loadavg()[0].toFixed(2)}`);
  }
  if (PARTS.includes('draft') && !PARTS.includes('spec')) {
    await printDraftSpeculation(ratio);
    console.log(`load average after the draft-model lines: ${os.loadavg()[0].toFixed(2)}`);
  }
  if (!PARTS.includes('split')) process.exit(0);
  const { single, pipe, tensor, tensorCold, tensorSleep, both, pipe2, ceiling, waitMs } = await measureAll();
  const row = (name: string, v: number, target?: number) =>
    console.log(`${name.padEnd(44)} ${v.toFixed(1).padStart(7)} tok/s  ${(v / single).toFixed(2)}x single${target ? `  (target >= ${target}x: ${v / single >= target ? 'met' : 'NOT met'})` : ''}`);
  row('single process (1 thread)', single);
  row('2-stage pipeline, 2 processes', pipe, 0.9);
  row('tensor parallel 2, 2 processes x 1 thread', tensor, 1.7);
  row('(tensor parallel 2, ranks never poll)', tensorSleep);
  row('(tensor parallel 2, cold: no warm-up run)', tensorCold);
  row('(two independent singles at once, summed)', both);
  row('(2-stage pipeline, 2 streams at once, summed)', pipe2);
  row('(TP-2 ceiling: maths/2 + measured waits)', ceiling);
  console.log(`tensor parallel 2 reached ${((100 * tensor) / both).toFixed(0)}% of the two-singles headroom (${(tensor / single).toFixed(2)}x of ${(both / single).toFixed(2)}x)`);
  console.log('"two independent singles" is the parallel headroom this machine gave 2 processes in the same rounds (~2x on two idle cores): tensor parallel over 2 processes cannot exceed it');
  console.log(`"TP-2 ceiling": two processes computing ${(((1000 / single / 2) / MEETINGS) * 1000).toFixed(0)} us then meeting in the runners' ${(HIDDEN * 4) / 1024} KiB all-reduce waited ${(waitMs * 1000).toFixed(0)} us per meeting on average in the best round (median 30-50 us measured with each pinned to its own core): half the single's time plus ${MEETINGS} such waits per token`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
