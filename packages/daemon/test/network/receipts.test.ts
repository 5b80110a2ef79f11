import { describe, expect, it } from 'vitest';
import { Ledger } from '../../src/network/ledger.js';
import { checkResult, newJobId, signAck, signResult, signTicket, verifyReceipt, type Receipt } from '../../src/network/receipts.js';
import { signDocument, type Signer } from '../../src/network/signed.js';
import { NETWORK, newSigner } from './fixtures.js';

async function receipt(requester: Signer, server: Signer, o: { price?: number; prompt?: number; completion?: number; job?: string; network?: string } = {}): Promise<Receipt> {
  const { signed: ticket } = await signTicket(requester, { network: o.network ?? NETWORK, job: o.job ?? newJobId(), server: server.peerId, model: 'orchard-demo', maxTokens: 100, pricePer1M: o.price ?? 1000, issuedAt: 10 });
  const job = JSON.parse(ticket.body).job as string;
  const { signed: result } = await signResult(server, ticket, { job, promptTokens: o.prompt ?? 12, completionTokens: o.completion ?? 30, finishReason: 'length', firstTokenMs: 5, totalMs: 50, finishedAt: 60 });
  const { signed: ack } = await signAck(requester, job, result, 70);
  return { ticket, result, ack };
}

describe('bilateral receipts', () => {
  it('a receipt signed by both sides verifies from the peer ids alone and charges price x tokens', async () => {
    const a = await newSigner();
    const c = await newSigner();
    const r = await verifyReceipt(JSON.parse(JSON.stringify(await receipt(a, c, { price: 2500, prompt: 12, completion: 30 }))));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.receipt.ticket.requester).toBe(a.peerId);
    expect(r.receipt.result.server).toBe(c.peerId);
    expect(r.receipt.charge).toBe(2500 * 42); // micro-credits: 42 tokens at 2500 credits per 1M
  });

  it('each part must be signed by the right peer and bound to the others', async () => {
    const a = await newSigner();
    const c = await newSigner();
    const x = await newSigner();
    const good = await receipt(a, c);
    const other = await receipt(a, c);
    const job = JSON.parse(good.ticket.body).job;
    // the server's result re-signed by someone else
    const resultByX = await signDocument(x, 'job-result/1', { ...JSON.parse(good.result.body), server: x.peerId });
    expect(await verifyReceipt({ ...good, result: resultByX })).toEqual({ ok: false, reason: expect.stringContaining('the job went to') });
    // an ack by a third party
    const { signed: ackByX } = await signAck(x, job, good.result, 1);
    expect(await verifyReceipt({ ...good, ack: ackByX })).toEqual({ ok: false, reason: expect.stringContaining('another peer') });
    // parts from two different jobs
    expect((await verifyReceipt({ ...good, result: other.result })).ok).toBe(false);
    expect((await verifyReceipt({ ...good, ack: other.ack })).ok).toBe(false);
    // a changed token count breaks the server's signature
    expect((await verifyReceipt({ ...good, result: { ...good.result, body: good.result.body.replace('"completionTokens":30', '"completionTokens":90') } })).ok).toBe(false);
    // a peer cannot pay itself
    expect(await verifyReceipt(await receipt(a, a))).toEqual({ ok: false, reason: 'receipt: a peer cannot serve itself' });
  });

  it('the requester will not countersign more tokens than it allowed or its prompt could hold', async () => {
    const a = await newSigner();
    const c = await newSigner();
    const { ticket, signed } = await signTicket(a, { network: NETWORK, job: newJobId(), server: c.peerId, model: 'm', maxTokens: 10, pricePer1M: 1, issuedAt: 1 });
    const res = (completionTokens: number, promptTokens = 5) => signResult(c, signed, { job: ticket.job, promptTokens, completionTokens, finishReason: 'length', firstTokenMs: 1, totalMs: 2, finishedAt: 3 });
    expect((await checkResult(ticket, signed, (await res(10)).signed, { maxPromptTokens: 50 })).ok).toBe(true);
    expect(await checkResult(ticket, signed, (await res(11)).signed, { maxPromptTokens: 50 })).toEqual({ ok: false, reason: 'result claims 11 completion tokens; the ticket allowed 10' });
    expect((await checkResult(ticket, signed, (await res(5, 51)).signed, { maxPromptTokens: 50 })).ok).toBe(false);
  });
});

describe('ledger', () => {
  it('balances move from requester to server, and everyone holding the same receipts agrees', async () => {
    const [a, b, c] = await Promise.all([newSigner(), newSigner(), newSigner()]);
    const receipts = [await receipt(a, c, { price: 1000, prompt: 10, completion: 10 }), await receipt(b, c, { price: 500, prompt: 20, completion: 20 }), await receipt(c, a, { price: 100, prompt: 5, completion: 5 })];
    const books = [new Ledger(NETWORK), new Ledger(NETWORK)];
    for (const [i, book] of books.entries()) {
      for (const r of i === 0 ? receipts : [...receipts].reverse()) {
        const v = await verifyReceipt(r);
        if (!v.ok) throw new Error(v.reason);
        expect(book.add(v.receipt)).toBe('added');
      }
    }
    const byPeer = (l: Ledger) => Object.fromEntries(l.balances().map((x) => [x.peer, x]));
    expect(byPeer(books[0])).toEqual(byPeer(books[1]));
    const c0 = books[0].balance(c.peerId);
    expect(c0).toMatchObject({ earned: 20 * 1000 + 40 * 500, spent: 10 * 100, jobsServed: 2, tokensServed: 60, jobsRequested: 1 });
    expect(c0.net).toBe(c0.earned - c0.spent);
    expect(books[0].balance(a.peerId).net).toBe(-20 * 1000 + 10 * 100);
    expect(books[0].balances().reduce((s, x) => s + x.net, 0)).toBe(0); // credits move, none appear
  });

  it('a receipt counts once; a different one for the same job is a conflict; other networks are kept out', async () => {
    const [a, c] = await Promise.all([newSigner(), newSigner()]);
    const job = newJobId();
    const first = await verifyReceipt(await receipt(a, c, { job, completion: 10 }));
    const second = await verifyReceipt(await receipt(a, c, { job, completion: 20 }));
    const elsewhere = await verifyReceipt(await receipt(a, c, { network: 'other' }));
    if (!first.ok || !second.ok || !elsewhere.ok) throw new Error('fixture');
    const l = new Ledger(NETWORK);
    expect(l.add(first.receipt)).toBe('added');
    expect(l.add(first.receipt)).toBe('duplicate');
    expect(l.add(second.receipt)).toBe('conflict');
    expect(l.add(elsewhere.receipt)).toBe('wrong-network');
    expect(l.size).toBe(1);
    expect(l.conflicts).toBe(1);
    expect(l.balance(c.peerId).jobsServed).toBe(1);
  });
});
