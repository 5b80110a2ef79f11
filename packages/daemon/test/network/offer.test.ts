import { describe, expect, it } from 'vitest';
import { OfferBook } from '../../src/network/offer-book.js';
import { MAX_OFFER_TTL_MS, signOffer, verifyOffer } from '../../src/network/offer.js';
import { signDocument } from '../../src/network/signed.js';
import { NETWORK, newSigner, offerBody } from './fixtures.js';

const NOW = 1_000_000;
const ctx = { network: NETWORK, now: NOW };

describe('signed offers', () => {
  it('an offer signed with the peer key verifies, for anyone who knows only its peer id', async () => {
    const s = await newSigner();
    const offer = await signOffer(s, offerBody(s.peerId));
    const wire = JSON.parse(JSON.stringify(offer.signed));
    const r = await verifyOffer(wire, { ...ctx, from: s.peerId });
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.offer.body).toEqual(offer.body);
  });

  it('a changed body, another signer, a wrong sender or another network is rejected with the reason', async () => {
    const a = await newSigner();
    const b = await newSigner();
    const offer = await signOffer(a, offerBody(a.peerId));
    const tampered = { ...offer.signed, body: offer.signed.body.replace('"pricePer1M":1000', '"pricePer1M":1') };
    expect(await verifyOffer(tampered, ctx)).toEqual({ ok: false, reason: expect.stringContaining('bad signature') });
    // b signs a body that names a as the offering peer
    const forged = await signDocument(b, 'offer/1', offerBody(a.peerId));
    expect(await verifyOffer(forged, ctx)).toEqual({ ok: false, reason: expect.stringContaining('bad signature') });
    expect(await verifyOffer(offer.signed, { ...ctx, from: b.peerId })).toEqual({ ok: false, reason: expect.stringContaining('sent by') });
    expect(await verifyOffer(offer.signed, { ...ctx, network: 'other' })).toEqual({ ok: false, reason: expect.stringContaining('network "testnet"') });
    // a signature made for another kind of document does not pass as an offer
    const asTicket = await signDocument(a, 'job-ticket/1', offerBody(a.peerId));
    expect((await verifyOffer(asTicket, ctx)).ok).toBe(false);
  });

  it('expired, future, over-long and duplicate-model offers are rejected', async () => {
    const s = await newSigner();
    const sign = async (over: Parameters<typeof offerBody>[1]) => (await signOffer(s, offerBody(s.peerId, over))).signed;
    expect(await verifyOffer(await sign({ issuedAt: NOW - 60_000, expiresAt: NOW }), ctx)).toEqual({ ok: false, reason: 'offer expired' });
    expect(await verifyOffer(await sign({ issuedAt: NOW + 120_000, expiresAt: NOW + 180_000 }), ctx)).toEqual({ ok: false, reason: 'offer issued in the future' });
    expect((await verifyOffer(await sign({ expiresAt: NOW + MAX_OFFER_TTL_MS + 1 }), ctx)).ok).toBe(false);
    const dup = offerBody(s.peerId);
    dup.models = [dup.models[0], dup.models[0]];
    expect(await verifyOffer(await sign({ models: dup.models }), ctx)).toEqual({ ok: false, reason: 'offer lists a model twice' });
  });

  it('signing refuses a body for another peer or out of bounds', async () => {
    const s = await newSigner();
    const other = await newSigner();
    await expect(signOffer(s, offerBody(other.peerId))).rejects.toThrow(/cannot be signed/);
    await expect(signOffer(s, offerBody(s.peerId, { pricePer1M: -1 }))).rejects.toThrow(/pricePer1M/);
  });
});

describe('offer book', () => {
  it('keeps the newest offer per peer and drops expired ones', async () => {
    const s = await newSigner();
    const book = new OfferBook({ retainMs: 1000 });
    const v1 = await signOffer(s, offerBody(s.peerId, { seq: 1 }));
    const v2 = await signOffer(s, offerBody(s.peerId, { seq: 2, pricePer1M: 5 }));
    expect(book.add(v2, NOW)).toBe('added');
    expect(book.add(v1, NOW)).toBe('stale');
    expect(book.get(s.peerId, NOW)?.body.pricePer1M).toBe(5);
    expect(book.list(NOW)).toHaveLength(1);
    expect(book.list(NOW + 60_000)).toHaveLength(0);
    expect(book.all()).toHaveLength(1); // still on the map, as offline
    expect(book.prune(NOW + 60_500)).toEqual([]);
    expect(book.prune(NOW + 61_000)).toEqual([s.peerId]);
    expect(book.size).toBe(0);
  });

  it('at capacity the offer closest to expiry makes room', async () => {
    const book = new OfferBook({ capacity: 2 });
    const signers = await Promise.all([newSigner(), newSigner(), newSigner()]);
    const [a, b, c] = signers;
    book.add(await signOffer(a, offerBody(a.peerId, { expiresAt: NOW + 50_000 })), NOW);
    book.add(await signOffer(b, offerBody(b.peerId, { expiresAt: NOW + 10_000 })), NOW);
    book.add(await signOffer(c, offerBody(c.peerId)), NOW);
    expect(book.list(NOW).map((o) => o.peer).sort()).toEqual([a.peerId, c.peerId].sort());
  });
});
