/**
 * Offers: what one pod tells the network it serves, signed by the peer that speaks for the pod (its
 * coordinator). Everything in an offer is self-declared, so routing trusts it only as a first guess
 * (speeds are replaced by what the requester measures, see routing.ts and reputation.ts); what an
 * offer must never do is crash or mislead the parser, so every field is bounded here.
 */
import { z } from 'zod';
import { openDocument, peerIdSchema, signDocument, type Signed, type Signer } from './signed.js';

export const OFFER_DOMAIN = 'offer/1';
/** An offer lives at most this long; pods refresh theirs well before. */
export const MAX_OFFER_TTL_MS = 10 * 60_000;
/** How far in the future an offer's issue time may be (clocks disagree). */
export const MAX_CLOCK_SKEW_MS = 60_000;

export const networkNameSchema = z.string().min(1).max(64).regex(/^[a-z0-9][a-z0-9._-]*$/, 'network names are lower-case letters, digits, ".", "_" and "-"');

const tps = z.number().finite().positive().max(1e7).nullable();

export const offerModelSchema = z.object({
  name: z.string().min(1).max(200),
  /** `serving`: an instance is ready now; `loadable`: the pod holds the files and would load it on demand. */
  state: z.enum(['serving', 'loadable']),
  contextTokens: z.number().int().positive().max(16_777_216),
  /** Measured by the pod's own instance (null until it has served). */
  decodeTps: tps,
  prefillTps: tps,
});
export type OfferModel = z.infer<typeof offerModelSchema>;

export const offerNodeSchema = z.object({
  name: z.string().max(128),
  chip: z.string().max(128),
  memoryBytes: z.number().finite().nonnegative().max(2 ** 60),
});

/** Self-declared and coarse: whole degrees only (the publisher rounds), a label for people. */
export const regionSchema = z.object({
  label: z.string().min(1).max(64),
  lat: z.number().int().min(-90).max(90),
  lon: z.number().int().min(-180).max(180),
});
export type Region = z.infer<typeof regionSchema>;

export const offerBodySchema = z
  .object({
    v: z.literal(1),
    network: networkNameSchema,
    peer: peerIdSchema,
    /** Grows with every offer a peer publishes; an older one never replaces a newer one. */
    seq: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
    issuedAt: z.number().int().nonnegative(),
    expiresAt: z.number().int().nonnegative(),
    pod: z.object({ name: z.string().max(128), nodes: z.array(offerNodeSchema).min(1).max(64) }),
    region: regionSchema.nullable(),
    models: z.array(offerModelSchema).max(64),
    load: z.object({ active: z.number().int().nonnegative().max(1e6), queued: z.number().int().nonnegative().max(1e6) }),
    /** Credits per 1M tokens (prompt + completion). */
    pricePer1M: z.number().int().nonnegative().max(1e12),
    policy: z.object({
      lending: z.enum(['idle', 'share']),
      maxTokensPerJob: z.number().int().positive().max(16_777_216),
      maxConcurrentJobs: z.number().int().positive().max(1024),
    }),
  })
  .strict();
export type OfferBody = z.infer<typeof offerBodySchema>;

export interface Offer {
  readonly body: OfferBody;
  readonly signed: Signed;
}

export async function signOffer(signer: Signer, body: OfferBody): Promise<Offer> {
  if (body.peer !== signer.peerId) throw new Error(`an offer for ${body.peer} cannot be signed by ${signer.peerId}`);
  const check = offerBodySchema.safeParse(body);
  if (!check.success) throw new Error(`offer: ${check.error.issues[0]?.path.join('.')}: ${check.error.issues[0]?.message}`);
  return { body, signed: await signDocument(signer, OFFER_DOMAIN, body) };
}

export interface OfferContext {
  network: string;
  now: number;
  /** The peer the bytes came from when the transport authenticates it (gossipsub's signed `from`). */
  from?: string;
}

export type OfferCheck = { ok: true; offer: Offer } | { ok: false; reason: string };

/** Validates an untrusted offer: signature, network, sender, times, limits. Never throws. */
export async function verifyOffer(input: unknown, ctx: OfferContext): Promise<OfferCheck> {
  const opened = await openDocument(OFFER_DOMAIN, input, offerBodySchema, (b) => b.peer);
  if (!opened.ok) return opened;
  const body = opened.value;
  if (body.network !== ctx.network) return { ok: false, reason: `offer for network "${body.network}", not "${ctx.network}"` };
  if (ctx.from !== undefined && ctx.from !== body.peer) return { ok: false, reason: `offer of ${body.peer} sent by ${ctx.from}` };
  if (body.expiresAt <= body.issuedAt) return { ok: false, reason: 'offer expires before it was issued' };
  if (body.expiresAt - body.issuedAt > MAX_OFFER_TTL_MS) return { ok: false, reason: `offer lives ${body.expiresAt - body.issuedAt} ms, over the ${MAX_OFFER_TTL_MS} ms limit` };
  if (body.issuedAt > ctx.now + MAX_CLOCK_SKEW_MS) return { ok: false, reason: 'offer issued in the future' };
  if (body.expiresAt <= ctx.now) return { ok: false, reason: 'offer expired' };
  const names = new Set(body.models.map((m) => m.name));
  if (names.size !== body.models.length) return { ok: false, reason: 'offer lists a model twice' };
  return { ok: true, offer: { body, signed: { body: opened.body, sig: (input as Signed).sig } } };
}

/** The offer's entry for `model`, if it serves or can load it. */
export function offeredModel(offer: OfferBody, model: string): OfferModel | undefined {
  return offer.models.find((m) => m.name === model);
}
