import { stageMembers, vocabSlice, type InstanceLayout } from '@orchard/engine';
import { pollWhile } from './poll.js';
import type { Group } from './transport.js';

/**
 * The sampler's full-vocabulary logits: its own slice (vocabulary rows from 0) and every other
 * last-stage rank's, received straight into place in a buffer kept for the instance's life (one row),
 * or row by row into a fresh one (a draft's check: every row's logits).
 */
export class LogitGather {
  readonly #vocab: number;
  readonly #full: Float32Array;
  readonly #peers: { rank: number; from: number; width: number; rows: Float32Array }[];

  constructor(layout: InstanceLayout, vocab: number) {
    this.#vocab = vocab;
    this.#full = new Float32Array(layout.tensor > 1 ? vocab : 0);
    const members = stageMembers(layout, layout.stages.length - 1);
    this.#peers = members.slice(1).map((rank, i) => {
      const [v0, v1] = vocabSlice(vocab, i + 1, members.length);
      return { rank, from: v0, width: v1 - v0, rows: this.#full.subarray(v0, v1) };
    });
  }

  /** `own` (this rank's forward output, `rows` rows) joined with the peers' slices; `own` itself without a tensor split. */
  async join(group: Group, own: Float32Array, timeoutMs: number, pollMs: number, rows = 1): Promise<Float32Array> {
    if (!this.#peers.length) return own;
    if (rows === 1) {
      const recvs = this.#peers.map((p) => group.recv(p.rank, p.rows, { timeoutMs }));
      this.#full.set(own);
      await pollWhile(Promise.all(recvs), pollMs);
      return this.#full;
    }
    const V = this.#vocab;
    const parts = this.#peers.map((p) => new Float32Array(rows * p.width));
    const recvs = this.#peers.map((p, i) => group.recv(p.rank, parts[i], { timeoutMs }));
    const full = new Float32Array(rows * V);
    const ownWidth = own.length / rows;
    for (let r = 0; r < rows; r++) full.set(own.subarray(r * ownWidth, (r + 1) * ownWidth), r * V);
    await pollWhile(Promise.all(recvs), pollMs);
    this.#peers.forEach((p, i) => {
      for (let r = 0; r < rows; r++) full.set(parts[i].subarray(r * p.width, (r + 1) * p.width), r * V + p.from);
    });
    return full;
  }
}
