import { generateKeyPair } from '@libp2p/crypto/keys';
import type { OfferBody, OfferModel } from '../../src/network/offer.js';
import { signerFromKey, type Signer } from '../../src/network/signed.js';

export const NETWORK = 'testnet';

export async function newSigner(): Promise<Signer> {
  return signerFromKey(await generateKeyPair('Ed25519'));
}

export function model(name: string, over: Partial<OfferModel> = {}): OfferModel {
  return { name, state: 'serving', contextTokens: 2048, decodeTps: 50, prefillTps: 400, ...over };
}

export function offerBody(peer: string, over: Partial<OfferBody> = {}, now = 1_000_000): OfferBody {
  return {
    v: 1,
    network: NETWORK,
    peer,
    seq: 1,
    issuedAt: now,
    expiresAt: now + 60_000,
    pod: { name: 'pod', nodes: [{ name: 'mac', chip: 'Apple M4 Max', memoryBytes: 128 * 2 ** 30 }] },
    region: { label: 'Berlin', lat: 52, lon: 13 },
    models: [model('orchard-demo')],
    load: { active: 0, queued: 0 },
    pricePer1M: 1000,
    policy: { lending: 'idle', maxTokensPerJob: 1024, maxConcurrentJobs: 1 },
    ...over,
  };
}
