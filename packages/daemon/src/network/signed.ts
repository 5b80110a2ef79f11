/**
 * Signed documents of the wide-area network (offers, job tickets, results, acknowledgements).
 *
 * A document travels as `{ body, sig }`: `body` is the JSON text exactly as signed and `sig` the
 * Ed25519 signature (base64) over a domain tag and that text. Signing the text rather than a
 * re-serialisation means no canonical-JSON rules to agree on; the tag keeps a signature made for one
 * kind of document from being replayed as another. Keys are libp2p peer keys: an Ed25519 peer id
 * embeds its public key, so a document names its signer by peer id and anyone can check it.
 */
import type { PrivateKey, PublicKey } from '@libp2p/interface';
import { peerIdFromPrivateKey, peerIdFromString } from '@libp2p/peer-id';
import { createHash } from 'node:crypto';
import { z } from 'zod';

/** Longest body accepted anywhere in the network protocols (offers and tickets are far smaller). */
export const MAX_SIGNED_BODY = 32 * 1024;

export const signedSchema = z.object({
  body: z.string().min(2).max(MAX_SIGNED_BODY),
  /** base64 of 64 signature bytes. */
  sig: z.string().min(80).max(100),
}).strict();
export type Signed = z.infer<typeof signedSchema>;

/** Something that signs as one peer: the node's libp2p key, or a test key. */
export interface Signer {
  readonly peerId: string;
  sign(data: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

export function signerFromKey(key: PrivateKey): Signer {
  return { peerId: peerIdFromPrivateKey(key).toString(), sign: (data) => key.sign(data) };
}

const encoder = new TextEncoder();
const tagged = (domain: string, body: string) => encoder.encode(`orchard/${domain}\n${body}`);

export async function signDocument(signer: Signer, domain: string, value: unknown): Promise<Signed> {
  const body = JSON.stringify(value);
  if (body.length > MAX_SIGNED_BODY) throw new Error(`${domain} document is ${body.length} characters, over the ${MAX_SIGNED_BODY} limit`);
  const sig = await signer.sign(tagged(domain, body));
  return { body, sig: Buffer.from(sig).toString('base64') };
}

/** The Ed25519 public key a peer id embeds, or null for a malformed or non-Ed25519 id. */
export function publicKeyOf(peerId: string): PublicKey | null {
  try {
    const id = peerIdFromString(peerId);
    return id.type === 'Ed25519' ? (id.publicKey ?? null) : null;
  } catch {
    return null;
  }
}

export type Opened<T> = { ok: true; value: T; body: string } | { ok: false; reason: string };

/**
 * Checks an untrusted document: shape, JSON, schema, then the signature of the peer the document
 * names as its signer (`signerOf`). Never throws.
 */
export async function openDocument<T>(domain: string, input: unknown, schema: z.ZodType<T>, signerOf: (value: T) => string): Promise<Opened<T>> {
  const env = signedSchema.safeParse(input);
  if (!env.success) return { ok: false, reason: `${domain}: not a signed document (${issueText(env.error)})` };
  let json: unknown;
  try {
    json = JSON.parse(env.data.body);
  } catch {
    return { ok: false, reason: `${domain}: body is not JSON` };
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) return { ok: false, reason: `${domain}: ${issueText(parsed.error)}` };
  const signer = signerOf(parsed.data);
  const key = publicKeyOf(signer);
  if (!key) return { ok: false, reason: `${domain}: signer ${signer.slice(0, 64)} is not an Ed25519 peer id` };
  const sig = Buffer.from(env.data.sig, 'base64');
  // One spelling per signature (Node's decoder also takes unpadded or otherwise loose base64), so
  // equal documents are equal text.
  if (sig.length !== 64 || sig.toString('base64') !== env.data.sig) return { ok: false, reason: `${domain}: the signature is not 64 bytes of base64` };
  let good = false;
  try {
    good = await key.verify(tagged(domain, env.data.body), sig);
  } catch {
    good = false;
  }
  if (!good) return { ok: false, reason: `${domain}: bad signature for ${signer}` };
  return { ok: true, value: parsed.data, body: env.data.body };
}

/** SHA-256 of a document's body (hex): how a later document refers to an earlier one. */
export function bodyHash(doc: Signed): string {
  return createHash('sha256').update(doc.body).digest('hex');
}

export function issueText(error: z.ZodError): string {
  const issue = error.issues[0];
  return issue ? `${issue.path.join('.') || '(root)'}: ${issue.message}` : 'schema mismatch';
}

/** A peer id as the network protocols accept it (base58btc Ed25519 ids are 52 characters). */
export const peerIdSchema = z.string().min(40).max(64).regex(/^[1-9A-HJ-NP-Za-km-z]+$/, 'not a base58 peer id');
