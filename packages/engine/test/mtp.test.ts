/**
 * DeepSeek-V3 multi-token prediction (model/mtp.ts, generate/mtp-draft.ts) on a random DeepSeek-V3-shaped
 * checkpoint written with its MTP layer as DeepSeek's has it (model.layers.{num_hidden_layers}.*: a
 * decoder layer with MLA and experts, plus embed_tokens, enorm, hnorm, eh_proj, shared_head).
 *
 * - The main model ignores the layer: the same seed with and without it decodes the same tokens.
 * - The head against a float64 reference written here from the tensors in the file (embedding, the two
 *   norms, the concatenation order, eh_proj, shared_head), with the decoder layer itself run by the
 *   engine's reference backend on the whole sequence at once (that layer is checked against PyTorch in
 *   torch-reference.test.ts) while the head runs it incrementally over its KV cache.
 * - As generate's drafter: the output equals plain decode, greedy and seeded sampling. A random MTP layer
 *   agrees with its random model no more than chance; the acceptance is printed, not asserted.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generate, loadInProcessModel, type InProcessModel } from '../src/index.js';
import { MtpHead } from '../src/model/mtp.js';
import { MtpDrafter } from '../src/generate/mtp-draft.js';
import { writeRandomModel } from '../src/testing/index.js';
import { argmaxOf, maxAbsDiff, tempDir } from './helpers.js';

const tmp = tempDir('mtp');
const disposables: { dispose(): void }[] = [];
afterAll(() => {
  disposables.forEach((d) => d.dispose());
  tmp.cleanup();
});

const withMtp = join(tmp.dir, 'with');
const without = join(tmp.dir, 'without');
const OPTIONS = { variant: 'deepseek-v3' as const, seed: 21, numLayers: 2 };
writeRandomModel(withMtp, { ...OPTIONS, mtpLayers: 1 });
writeRandomModel(without, OPTIONS);
const PROMPT = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 72, 101, 108];

/** Every F32 tensor of a single-file safetensors checkpoint, as float64 arrays. */
function readTensors(dir: string): Map<string, { shape: number[]; data: Float64Array }> {
  const buf = readFileSync(join(dir, 'model.safetensors'));
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const out = new Map<string, { shape: number[]; data: Float64Array }>();
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    if (t.dtype !== 'F32') throw new Error(`${name}: ${t.dtype}`);
    const bytes = buf.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]);
    const f = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
    out.set(name, { shape: t.shape, data: Float64Array.from(f) });
  }
  return out;
}

function rmsnorm64(x: ArrayLike<number>, w: ArrayLike<number>, eps: number): Float64Array {
  let ss = 0;
  for (let i = 0; i < x.length; i++) ss += x[i] * x[i];
  const s = 1 / Math.sqrt(ss / x.length + eps);
  return Float64Array.from({ length: x.length }, (_, i) => x[i] * s * w[i]);
}

/** y = W·x for W [rows, cols] row-major. */
function matvec64(w: { shape: number[]; data: Float64Array }, x: ArrayLike<number>): Float64Array {
  const [rows, cols] = w.shape;
  const y = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let s = 0;
    for (let c = 0; c < cols; c++) s += w.data[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

describe('DeepSeek-V3 multi-token prediction layer', () => {
  it('the main model ignores the MTP layer: the same tokens with and without it in the checkpoint', async () => {
    const a = loadInProcessModel(withMtp, { maxBatch: 8 });
    const b = loadInProcessModel(without, { maxBatch: 8 });
    disposables.push(a, b);
    const ta = await generate(a, PROMPT, { maxTokens: 12, stopTokenIds: [] });
    const tb = await generate(b, PROMPT, { maxTokens: 12, stopTokenIds: [] });
    expect(ta.tokens).toEqual(tb.tokens);
  });

  it('a checkpoint without the layer gets a clear error', () => {
    expect(() => MtpHead.load(without)).toThrow(/no multi-token-prediction layer.*model\.layers\.2\.eh_proj\.weight/);
  });

  it('the model\'s final hidden states and the head\'s logits match a float64 reference', async () => {
    const model = loadInProcessModel(withMtp, { maxBatch: 32 });
    disposables.push(model);
    const head = MtpHead.load(withMtp, { maxBatch: 32 });
    disposables.push(head);
    const cfg = model.config;
    const D = cfg.hiddenSize;
    const V = cfg.vocabSize;
    const T = readTensors(withMtp);
    const L = cfg.numLayers;
    const p = `model.layers.${L}`;

    // The model's hidden rows: after model.norm, lm_head of each gives that row's logits.
    const session = model.newSession(64);
    const logits = await session.forwardAll!(PROMPT);
    const H = session.finalHidden!(PROMPT.length);
    for (let j = 0; j < PROMPT.length; j++) {
      const ref = matvec64(T.get('lm_head.weight')!, H.subarray(j * D, (j + 1) * D));
      expect(maxAbsDiff(ref, logits.subarray(j * V, (j + 1) * V))).toBeLessThan(1e-4);
    }

    // MTP rows j = 0 .. n-1: (h_j, t_{j+1}). The layer's input in float64 from the file's tensors.
    const n = PROMPT.length - 1;
    const eps = cfg.rmsNormEps;
    const emb = T.get(`${p}.embed_tokens.weight`)!;
    const inputs = new Float32Array(n * D);
    for (let j = 0; j < n; j++) {
      const e = rmsnorm64(emb.data.subarray(PROMPT[j + 1] * D, (PROMPT[j + 1] + 1) * D), T.get(`${p}.enorm.weight`)!.data, eps);
      const h = rmsnorm64(H.subarray(j * D, (j + 1) * D), T.get(`${p}.hnorm.weight`)!.data, eps);
      inputs.set(matvec64(T.get(`${p}.eh_proj.weight`)!, [...e, ...h]), j * D);
    }
    // The decoder layer over the whole sequence at once (reference backend, a fresh cache).
    const layerOut = Float32Array.from((await head.block.forwardBatch([{ input: { hidden: inputs, n }, cache: head.block.newCache(64) }]))[0]);
    const want: Float64Array[] = [];
    for (let j = 0; j < n; j++) want.push(matvec64(T.get(`${p}.shared_head.head.weight`)!, rmsnorm64(layerOut.subarray(j * D, (j + 1) * D), T.get(`${p}.shared_head.norm.weight`)!.data, eps)));

    // The head, incrementally: rows in steps of 5, 1, then the rest, over its own cache.
    const cache = head.newCache(64);
    let j = 0;
    for (const step of [5, 1, n - 6]) {
      const out = await head.forward(H.subarray(j * D, (j + step) * D), PROMPT.slice(j + 1, j + 1 + step), cache);
      for (let b = 0; b < step; b++) expect(maxAbsDiff(want[j + b], out.logits.subarray(b * V, (b + 1) * V))).toBeLessThan(1e-4);
      j += step;
    }
    expect(cache.length).toBe(n);

    // The drafter lines rows up the same way: given the model's rows for positions 0..n-1 and the
    // context up to position n, its first draft is row n-1's argmax; the rows it chains on are dropped.
    const drafter = new MtpDrafter(head, 64);
    drafter.confirm(0, H.subarray(0, n * D), n);
    const drafts = await drafter.draft(PROMPT, 3);
    expect(drafts.length).toBe(3);
    expect(drafts[0]).toBe(argmaxOf(want[n - 1]));
    expect(() => drafter.confirm(0, H, 1)).toThrow(/expected 16/);
    drafter.dispose();
    await expect(head.forward(H.subarray(0, D), [V], cache)).rejects.toThrow(/outside the vocabulary/);
  });

  it('as the drafter: generate\'s output equals plain decode (greedy and seeded sampling)', async () => {
    const model = loadInProcessModel(withMtp, { maxBatch: 8 });
    disposables.push(model);
    const head = MtpHead.load(withMtp, { maxBatch: 8 });
    disposables.push(head);
    for (const sampling of [{}, { temperature: 0.8, seed: 5 }]) {
      const plain = await generate(model, PROMPT, { maxTokens: 20, stopTokenIds: [], ...sampling });
      const fast = await generate(model, PROMPT, { maxTokens: 20, stopTokenIds: [], ...sampling, mtp: head, promptLookup: { draftTokens: 3, adaptive: false } });
      expect(fast.tokens).toEqual(plain.tokens);
      const { drafted, accepted } = fast.speculation!;
      expect(drafted).toBeGreaterThan(0);
      console.log(`random DeepSeek-V3 MTP drafter (${JSON.stringify(sampling)}): ${accepted}/${drafted} drafted tokens accepted`);
      // The timed policy's lengths: the same tokens.
      expect((await generate(model, PROMPT, { maxTokens: 20, stopTokenIds: [], ...sampling, mtp: head })).tokens).toEqual(plain.tokens);
    }
  });
});
