/**
 * One rank of one instance, as a state machine driven by its daemon's messages:
 *
 *   idle --init--> loading --(shard loaded)--> waiting-for-peers --peers--> connecting --(group up)--> ready
 *   any --shutdown--> stopping (exit 0);  any failure --> dead (report, exit 1)
 *
 * Loading checks config.json (and, on the driving rank, builds the tokenizer) before a byte of
 * weights is read, and a model that cannot load is reported as `load-failed` (with whether its files
 * are at fault), not as a silent exit, so the request waiting for it hears the reason at once.
 *
 * Rank 0 runs requests (`generate`) on its Driver; the daemon's executor is the request queue, so a
 * request that arrives while the rank is not ready, or beyond the driver's sequence slots, is refused
 * rather than queued here. Other ranks follow the driver's headers until told to stop.
 */
import { compileConstraintOrDrop, createReferenceBackend, createWasmBackend, loadModelConfig, loadTokenizer, ModelFormatError, MtpHead, worldSize, UnsupportedModelError, type ConstraintSpec, type ModelTokenizer, type TokenVocabulary } from '@orchard/engine';
import { createDataPlane } from './data-plane.js';
import { loadRankOn } from './gpu-shard.js';
import { startRank } from './local.js';
import { DraftModel } from './draft-model.js';
import type { FromRunner, RunnerInit, ToRunner } from './protocol.js';
import { TokenBatcher } from './token-batch.js';
import { selectRdma, type RdmaSelection } from './rdma-select.js';
import { POLL_MS } from './poll.js';
import type { Driver } from './driver.js';
import type { BatchDriver } from './batch-driver.js';
import { listenTcp, type Group, type TcpPeer } from './transport.js';

export type RunnerState = 'idle' | 'loading' | 'waiting-for-peers' | 'connecting' | 'ready' | 'stopping' | 'dead';

export interface RunnerHost {
  send(m: FromRunner): void;
  exit(code: number): void;
  log(line: string): void;
}

export class Runner {
  readonly #host: RunnerHost;
  /** Every message to the daemon goes through here: a turn's tokens as one message (token-batch.ts). */
  readonly #out: TokenBatcher;
  #state: RunnerState = 'idle';
  #rank = -1;
  #group: Group | null = null;
  #rdma: RdmaSelection | null = null;
  #driver: Driver | BatchDriver | null = null;
  #peers: TcpPeer[] | null = null;
  #peersArrived: ((p: TcpPeer[]) => void) | null = null;
  /** Requests running on the driver, and those the daemon cancelled. */
  #active = 0;
  readonly #cancelled = new Set<number>();

  constructor(host: RunnerHost) {
    this.#host = host;
    this.#out = new TokenBatcher((m) => host.send(m));
  }

  get state(): RunnerState {
    return this.#state;
  }

  handle(m: ToRunner): void {
    switch (m.type) {
      case 'init':
        if (this.#state !== 'idle') return this.#host.log(`rank ${this.#rank}: a second init ignored`);
        this.#rank = m.init.rank;
        if (m.init.tokenIntervalMs !== undefined) this.#out.intervalMs = m.init.tokenIntervalMs;
        void this.#start(m.init).catch((err) => (this.#state === 'loading' ? this.#loadFailed(m.init.rank, err) : this.#die(`runner rank ${m.init.rank}: ${(err as Error).message}`)));
        return;
      case 'peers':
        this.#peers = m.peers;
        this.#peersArrived?.(m.peers);
        return;
      case 'generate':
        return this.#generate(m);
      case 'cancel':
        this.#cancelled.add(m.id);
        return;
      case 'shutdown':
        void this.#stop();
        return;
    }
  }

  async #start(i: RunnerInit): Promise<void> {
    this.#state = 'loading';
    const listener = await listenTcp({ host: i.listenHost });
    this.#out.send({ type: 'listening', port: listener.address.port });
    const t0 = performance.now();
    const pollMs = i.pollMs ?? POLL_MS;
    // Checked before the weights: a config the engine refuses fails here, named, in milliseconds; the
    // driving rank (which compiles output constraints against it) builds the tokenizer too — seconds
    // for a large vocabulary, so the other ranks, which never tokenize, do not.
    loadModelConfig(i.modelDir);
    const tokenizer: ModelTokenizer | null = i.rank === 0 ? loadTokenizer(i.modelDir) : null;
    // The shard's all-reduce needs the group, which exists only after every rank is listening.
    // gpu: WebGPU, or the wasm kernels when the GPU cannot be used (the note says why).
    const cpuBackend = (kind: 'reference' | 'wasm') => (kind === 'wasm' ? createWasmBackend({ threads: i.backend?.threads ?? 1 }) : createReferenceBackend());
    const { shard, note } = await loadRankOn(i.backend ?? { kind: 'reference' }, i.modelDir, i.layout, i.rank, () => this.#group!, {
      maxBatch: i.maxBatch,
      maxSeqLen: i.maxSeqLen,
      stepMs: i.stepMs,
      pollMs,
      cpuBackend,
    });
    if (note) this.#host.log(note);
    // The driving rank runs the draft model on CPU beside its own shard: the wasm kernels unless the rank runs the reference ones.
    const draftModel = i.rank === 0 && i.batch?.draftModel ? DraftModel.load(i.batch.draftModel, i.modelDir, { maxBatch: i.maxBatch, maxSeqLen: i.maxSeqLen, backend: cpuBackend(i.backend?.kind === 'reference' || !i.backend ? 'reference' : 'wasm') }) : undefined;
    // `--speculate mtp`: the checkpoint's MTP layer, on CPU beside a one-rank CPU instance's shard (the
    // only driver that sees the final hidden states it drafts from, mtp-draft.ts); elsewhere requests
    // asking for it get the driver's error.
    const mtp = i.batch?.speculate === 'mtp' && worldSize(i.layout) === 1 && i.backend?.kind !== 'gpu' ? MtpHead.load(i.modelDir, { maxBatch: i.maxBatch, maxSeqLen: i.maxSeqLen, backend: cpuBackend(i.backend?.kind === 'wasm' ? 'wasm' : 'reference') }) : undefined;
    const bytesRead = shard.bytesRead + (draftModel?.bytesRead ?? 0);
    this.#out.send({ type: 'loaded', loadMs: performance.now() - t0, bytesRead, backend: note ?? i.backend?.kind ?? 'reference' });
    if (this.#state !== 'loading') return; // stopped while loading
    this.#state = 'waiting-for-peers';
    const endpoints = this.#peers ?? (await new Promise<TcpPeer[]>((resolve) => (this.#peersArrived = resolve)));
    this.#state = 'connecting';
    // RDMA where both ends of a link have it, TCP elsewhere; the choice per link goes to the daemon with 'ready'.
    this.#rdma = await selectRdma(i.rank, endpoints, i.rdmaSim ?? null);
    const plane = await createDataPlane({
      rank: i.rank,
      peers: endpoints,
      groupId: i.groupId,
      secret: Buffer.from(i.secret, 'hex'),
      listener,
      connectTimeoutMs: 20_000,
      rdma: this.#rdma,
      security: i.security,
      log: (line) => this.#host.log(`rank ${i.rank}: ${line}`),
    });
    this.#group = plane.group;
    await plane.group.barrier({ timeoutMs: 20_000 });
    // Output constraints are compiled here, against this model's tokenizer, when a request brings one.
    let vocab: TokenVocabulary | null = null;
    const compile = (spec: ConstraintSpec, stopIds: number[]) =>
      compileConstraintOrDrop(spec, (vocab ??= (tokenizer ?? loadTokenizer(i.modelDir)).vocabulary()), { vocabSize: shard.config.vocabSize, stopIds }, (why) =>
        this.#host.log(`rank ${i.rank}: the tool-call grammar was left out (${why}): the reply is read unconstrained`),
      );
    const started = startRank(plane.group, i.layout, shard, { stepMs: i.stepMs, pollMs, compile, batch: i.batch, draftModel, mtp });
    this.#driver = started.driver;
    this.#state = 'ready';
    this.#out.send({ type: 'ready', links: plane.links, dataPlane: plane.summary });
    if (!this.#driver)
      started.done.then(
        () => this.#stop(),
        (err) => this.#die(`rank ${i.rank}: data plane failed: ${(err as Error).message}`),
      );
  }

  #generate({ id, req }: Extract<ToRunner, { type: 'generate' }>): void {
    const d = this.#driver;
    const refuse = (message: string) => this.#out.send({ type: 'failed', id, message });
    if (this.#state !== 'ready' || !d) return refuse(`rank ${this.#rank} is not ready (${this.#state})`);
    if (this.#active >= d.maxSequences) return refuse(`rank ${this.#rank}: all ${d.maxSequences} sequence slots are busy`);
    this.#active++;
    d.generate(req, (token, logprob) => {
      this.#out.token(id, token, logprob);
      return !this.#cancelled.has(id);
    }).then(
      (outcome) => this.#out.send({ type: 'done', id, outcome }),
      (err) => {
        // A constraint the grammar engine cannot compile, or a request the driver refuses: the request's fault.
        const invalid = (err as Error).name === 'ConstraintError' || err instanceof RangeError;
        this.#out.send({ type: 'failed', id, message: (err as Error).message, ...(invalid ? { invalid } : {}) });
        if (d.broken) this.#die(`rank 0: data plane failed: ${d.broken.message}`);
      },
    ).finally(() => {
      this.#active--;
      this.#cancelled.delete(id);
    });
  }

  async #stop(): Promise<void> {
    if (this.#state === 'stopping' || this.#state === 'dead') return;
    this.#state = 'stopping';
    try {
      await this.#driver?.stop();
      await this.#group?.close();
      await this.#rdma?.close();
    } finally {
      this.#host.exit(0);
    }
  }

  /** Loading failed: said once, typed, and the process ends. */
  #loadFailed(rank: number, err: unknown): void {
    if (this.#state === 'dead') return;
    this.#state = 'dead';
    const message = `runner rank ${rank} could not load the model: ${(err as Error).message ?? String(err)}`;
    this.#host.log(message);
    const files = err instanceof ModelFormatError || err instanceof UnsupportedModelError;
    this.#out.send({ type: 'load-failed', message, files });
    setTimeout(() => this.#host.exit(1), 50);
  }

  #die(message: string): void {
    if (this.#state === 'dead') return;
    this.#state = 'dead';
    this.#host.log(message);
    this.#out.send({ type: 'dead', message });
    setTimeout(() => this.#host.exit(1), 50);
  }
}
