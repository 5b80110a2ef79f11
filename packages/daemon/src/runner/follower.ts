import { pickToken, Sampler, rankOf, samplerRank, stageMembers, stageOf, type KVCache, type TokenConstraint } from '@orchard/engine';
import { HeaderCodec, type Header } from './header.js';
import { IDLE_TIMEOUT_MS, type LoopContext } from './loop-context.js';
import { LogitGather } from './logit-gather.js';
import { pollWhile } from './poll.js';
import { decodePayload, TokenReply } from './sample-wire.js';
import { SplitPrefix } from './split-prefix.js';
import { forwardSegments, kvBlocksOf, verifiesDrafts } from './step-forward.js';
import { confirmDraft, hiddenSegments, joinRows } from './step-rows.js';

/** The non-driver ranks: obey headers until a stop header or a failure. */
export async function runFollower(ctx: LoopContext): Promise<void> {
  const { group, layout, shard, pollMs } = ctx;
  const { stage, tensorRank } = stageOf(layout, group.rank);
  const header = new HeaderCodec(ctx.maxBatch);
  const D = shard.config.hiddenSize;
  const hidden = new Float32Array(ctx.maxBatch * D);
  const rowsOut = new Float32Array(ctx.maxBatch * D);
  const isSampler = group.rank === samplerRank(layout);
  const last = stage === layout.stages.length - 1;
  const caches = new Map<number, KVCache>();
  // A rank's prefix cache keeps its blocks where its K/V live (kvBlocksOf); one that cannot says so below.
  const blocks = kvBlocksOf(shard);
  const prefix = blocks ? new SplitPrefix(blocks) : null;
  /** The sampling rank's per-sequence sampling: sampler, output constraint, reply format. */
  const picks = new Map<number, { sampler: Sampler; constraint: TokenConstraint | null; logprobs?: number; reply: TokenReply }>();
  const gather = isSampler ? new LogitGather(layout, shard.config.vocabSize) : null;
  // Stage 0 takes the driver's embedded rows, later stages the previous stage's hidden states.
  const source = stage === 0 ? 0 : rankOf(layout, stage - 1, 0);
  // What this rank can do (bit 0: copy K/V blocks, for prefix reuse; bit 1: draft checks, for
  // speculation): the driver does each only if every rank can.
  await group.send(0, Int32Array.of((prefix ? 1 : 0) | (verifiesDrafts(shard) ? 2 : 0)), { timeoutMs: ctx.stepMs });
  try {
    for (;;) {
      await pollWhile(group.recv(0, header.buffer, { timeoutMs: IDLE_TIMEOUT_MS }), pollMs);
      const h = header.decode();
      if (h.op === 'stop') return;
      if (h.op === 'end') {
        // Hand the cache back now (GPU memory is not freed by GC in time), its blocks kept for reuse.
        const done = caches.get(h.slot);
        if (done) {
          rewind(h.slot, done, h.length);
          prefix?.end(h.slot, done);
          shard.releaseCache(done);
          caches.delete(h.slot);
        }
        continue;
      }
      if (h.op === 'begin') {
        const stale = caches.get(h.slot);
        if (stale) shard.releaseCache(stale);
        const cache = shard.newCache(h.capacity);
        caches.set(h.slot, cache);
        const reused = new Int32Array(h.cached);
        if (h.cached > 0) await group.recv(0, reused, { timeoutMs: ctx.stepMs });
        if (prefix) prefix.restoreExactly(h.slot, cache, reused, h.prefixBlocks, group.rank);
        else if (h.cached > 0) throw new Error(`data plane: rank ${group.rank} keeps no prefix cache but the driver reused ${h.cached} prompt tokens`);
        if (!isSampler) continue;
        picks.get(h.slot)?.constraint?.dispose();
        let payload = null;
        if (h.payloadBytes > 0) {
          const bytes = new Uint8Array(h.payloadBytes);
          await group.recv(0, bytes, { timeoutMs: ctx.stepMs });
          payload = decodePayload(bytes);
        }
        // The driver compiled the same constraint first, so a request it refuses never gets here.
        const constraint = payload?.constraint && ctx.compile ? await ctx.compile(payload.constraint, payload.stopTokenIds) : null;
        picks.set(h.slot, { sampler: new Sampler({ ...h.sampling, ...payload?.penalties }, payload?.history), constraint, logprobs: payload?.logprobs, reply: new TokenReply(payload?.logprobs) });
        continue;
      }
      await followStep(h);
    }
  } finally {
    for (const p of picks.values()) p.constraint?.dispose();
  }

  /** Drops a rejected draft's rows: the slot's cache continues at `length`. */
  function rewind(slot: number, cache: KVCache, length: number): void {
    if (cache.length < length) throw new Error(`data plane: slot ${slot} on rank ${group.rank} holds ${cache.length} tokens, the driver continues at ${length}: out of step`);
    cache.length = length;
    prefix?.rewind(slot, length);
  }

  async function followStep(h: Extract<Header, { op: 'forward' }>): Promise<void> {
    const caches_ = h.segments.map(({ slot, pos }) => {
      const cache = caches.get(slot);
      if (!cache) throw new Error(`data plane: forward for slot ${slot} before its begin, on rank ${group.rank}`);
      rewind(slot, cache, pos);
      return cache;
    });
    const n = h.tokens.length;
    await pollWhile(group.recv(source, hidden.subarray(0, n * D), { timeoutMs: ctx.stepMs }), pollMs);
    let fed = 0;
    const tokenAt = h.segments.map((seg) => (fed += seg.n) - seg.n);
    h.segments.forEach((seg, i) => prefix?.fed(seg.slot, h.tokens.subarray(tokenAt[i], tokenAt[i] + seg.n)));
    const outs = await forwardSegments(shard, hiddenSegments(hidden, D, h.segments, caches_));
    if (!last && tensorRank === 0) {
      const view = joinRows(outs, h.segments, D, rowsOut);
      await Promise.all(stageMembers(layout, stage + 1).map((r) => group.send(r, view, { timeoutMs: ctx.stepMs })));
    }
    if (!last) return;
    // The sampled segments' logits, in segment order: the sampler replies to the driver in that order.
    for (let i = 0; i < h.segments.length; i++) {
      const seg = h.segments[i];
      if (!seg.sample) continue;
      if (isSampler) {
        const p = picks.get(seg.slot)!;
        const pick = (logits: Float32Array) => pickToken(logits, p.sampler, p.constraint, p.logprobs);
        if (seg.draft === 0) {
          const r = await pick(await gather!.join(group, outs[i], ctx.stepMs, pollMs));
          await group.send(0, p.reply.encode(r.id, r.logprob), { timeoutMs: ctx.stepMs });
          continue;
        }
        // A draft's check: the tokens picked while they agree with the draft, their count first.
        const draft = Array.from(h.tokens.subarray(tokenAt[i] + 1, tokenAt[i] + seg.n));
        const picked = await confirmDraft(await gather!.join(group, outs[i], ctx.stepMs, pollMs, draft.length + 1), draft, pick);
        await group.send(0, Int32Array.of(picked.length), { timeoutMs: ctx.stepMs });
        for (const r of picked) await group.send(0, p.reply.encode(r.id, r.logprob), { timeoutMs: ctx.stepMs });
      } else {
        await group.send(samplerRank(layout), outs[i], { timeoutMs: ctx.stepMs });
      }
    }
  }
}
