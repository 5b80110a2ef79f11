/**
 * Bilateral receipts: the requester signs the job (ticket: model, token limit, price), the server
 * signs what it did (result: token counts and timing, bound to the ticket by hash), the requester
 * countersigns the result (ack, bound to the result by hash). A receipt is the three together; with
 * the two peers' public keys (their peer ids) anyone can check it, and a charge exists only where
 * both sides signed.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { networkNameSchema } from './offer.js';
import { bodyHash, openDocument, peerIdSchema, signDocument, signedSchema, type Signed, type Signer } from './signed.js';

export const TICKET_DOMAIN = 'job-ticket/1';
export const RESULT_DOMAIN = 'job-result/1';
export const ACK_DOMAIN = 'job-ack/1';

const jobIdSchema = z.string().regex(/^[0-9a-f]{32}$/, 'job ids are 32 hex digits');
const hashSchema = z.string().regex(/^[0-9a-f]{64}$/, 'hashes are 64 hex digits');
const count = z.number().int().nonnegative().max(1e9);
const ms = z.number().int().nonnegative().max(1e15);

export const ticketSchema = z
  .object({
    v: z.literal(1),
    network: networkNameSchema,
    job: jobIdSchema,
    requester: peerIdSchema,
    server: peerIdSchema,
    model: z.string().min(1).max(200),
    maxTokens: z.number().int().positive().max(16_777_216),
    /** Credits per 1M tokens the requester agrees to pay (the offer's price at the time). */
    pricePer1M: z.number().int().nonnegative().max(1e12),
    issuedAt: ms,
  })
  .strict();
export type Ticket = z.infer<typeof ticketSchema>;

export const resultSchema = z
  .object({
    v: z.literal(1),
    job: jobIdSchema,
    server: peerIdSchema,
    ticket: hashSchema,
    promptTokens: count,
    completionTokens: count,
    finishReason: z.enum(['stop', 'length', 'tool_calls']),
    firstTokenMs: ms,
    totalMs: ms,
    finishedAt: ms,
  })
  .strict();
export type JobResult = z.infer<typeof resultSchema>;

export const ackSchema = z.object({ v: z.literal(1), job: jobIdSchema, requester: peerIdSchema, result: hashSchema, at: ms }).strict();
export type Ack = z.infer<typeof ackSchema>;

export const receiptSchema = z.object({ ticket: signedSchema, result: signedSchema, ack: signedSchema });
export type Receipt = z.infer<typeof receiptSchema>;

export interface VerifiedReceipt {
  ticket: Ticket;
  result: JobResult;
  ack: Ack;
  /** What the requester owes the server, in micro-credits (1e-6 credit). */
  charge: number;
  signed: Receipt;
}

/** Price per 1M tokens x tokens / 1M, kept in whole micro-credits so sums are exact. */
export function chargeOf(pricePer1M: number, tokens: number): number {
  return pricePer1M * tokens;
}

export const MICRO = 1_000_000;

export function newJobId(): string {
  return randomBytes(16).toString('hex');
}

export async function signTicket(signer: Signer, t: Omit<Ticket, 'v' | 'requester'>): Promise<{ ticket: Ticket; signed: Signed }> {
  const ticket: Ticket = { v: 1, requester: signer.peerId, ...t };
  return { ticket, signed: await signDocument(signer, TICKET_DOMAIN, ticket) };
}

export async function openTicket(input: unknown) {
  return openDocument(TICKET_DOMAIN, input, ticketSchema, (t) => t.requester);
}

export async function signResult(signer: Signer, ticket: Signed, r: Omit<JobResult, 'v' | 'server' | 'ticket'>): Promise<{ result: JobResult; signed: Signed }> {
  const result: JobResult = { v: 1, server: signer.peerId, ticket: bodyHash(ticket), ...r };
  return { result, signed: await signDocument(signer, RESULT_DOMAIN, result) };
}

export interface ResultLimits {
  /** Most prompt tokens the requester's prompt can have become (its UTF-8 bytes plus a template allowance). */
  maxPromptTokens: number;
}

export type ResultCheck = { ok: true; result: JobResult } | { ok: false; reason: string };

/** The requester's check of a server's result before countersigning it. Never throws. */
export async function checkResult(ticket: Ticket, ticketSigned: Signed, input: unknown, limits: ResultLimits): Promise<ResultCheck> {
  const opened = await openDocument(RESULT_DOMAIN, input, resultSchema, (r) => r.server);
  if (!opened.ok) return opened;
  const r = opened.value;
  if (r.job !== ticket.job) return { ok: false, reason: `result for job ${r.job}, not ${ticket.job}` };
  if (r.server !== ticket.server) return { ok: false, reason: `result signed by ${r.server}, the job went to ${ticket.server}` };
  if (r.ticket !== bodyHash(ticketSigned)) return { ok: false, reason: 'result names another ticket' };
  if (r.completionTokens > ticket.maxTokens) return { ok: false, reason: `result claims ${r.completionTokens} completion tokens; the ticket allowed ${ticket.maxTokens}` };
  if (r.promptTokens > limits.maxPromptTokens) return { ok: false, reason: `result claims ${r.promptTokens} prompt tokens; the prompt cannot exceed ${limits.maxPromptTokens}` };
  if (r.firstTokenMs > r.totalMs) return { ok: false, reason: 'result: first token after the end' };
  return { ok: true, result: r };
}

export async function signAck(signer: Signer, job: string, result: Signed, at: number): Promise<{ ack: Ack; signed: Signed }> {
  const ack: Ack = { v: 1, job, requester: signer.peerId, result: bodyHash(result), at };
  return { ack, signed: await signDocument(signer, ACK_DOMAIN, ack) };
}

export type ReceiptCheck = { ok: true; receipt: VerifiedReceipt } | { ok: false; reason: string };

/** Checks a whole receipt from anyone: three signatures by the right peers, bound to each other. Never throws. */
export async function verifyReceipt(input: unknown): Promise<ReceiptCheck> {
  const env = receiptSchema.safeParse(input);
  if (!env.success) return { ok: false, reason: 'receipt: expected {ticket, result, ack}' };
  const t = await openTicket(env.data.ticket);
  if (!t.ok) return t;
  const ticket = t.value;
  if (ticket.requester === ticket.server) return { ok: false, reason: 'receipt: a peer cannot serve itself' };
  const r = await checkResult(ticket, env.data.ticket, env.data.result, { maxPromptTokens: 1e9 });
  if (!r.ok) return r;
  const a = await openDocument(ACK_DOMAIN, env.data.ack, ackSchema, (x) => x.requester);
  if (!a.ok) return a;
  const ack = a.value;
  if (ack.job !== ticket.job || ack.requester !== ticket.requester) return { ok: false, reason: 'receipt: acknowledgement of another job or by another peer' };
  if (ack.result !== bodyHash(env.data.result)) return { ok: false, reason: 'receipt: acknowledgement of another result' };
  const tokens = r.result.promptTokens + r.result.completionTokens;
  return { ok: true, receipt: { ticket, result: r.result, ack, charge: chargeOf(ticket.pricePer1M, tokens), signed: env.data } };
}
