/**
 * Balances from receipts. There is no central ledger: each node keeps the receipts it took part in
 * and those it heard about, checks every one (receipts.ts), and sums them. Two nodes holding the
 * same receipts compute the same balances. A job counts once, under the requester that issued its
 * id; a second, different receipt for the same job is kept out and reported as a conflict.
 */
import type { VerifiedReceipt } from './receipts.js';

export interface Balance {
  peer: string;
  /** Micro-credits earned serving and spent requesting. */
  earned: number;
  spent: number;
  net: number;
  tokensServed: number;
  tokensRequested: number;
  jobsServed: number;
  jobsRequested: number;
}

export type LedgerAdd = 'added' | 'duplicate' | 'conflict' | 'wrong-network';

export class Ledger {
  readonly network: string;
  #receipts = new Map<string, VerifiedReceipt>();
  #balances = new Map<string, Balance>();
  #conflicts = 0;

  constructor(network: string) {
    this.network = network;
  }

  /** Adds a receipt that verifyReceipt accepted. */
  add(r: VerifiedReceipt): LedgerAdd {
    if (r.ticket.network !== this.network) return 'wrong-network';
    const key = `${r.ticket.requester}/${r.ticket.job}`;
    const prev = this.#receipts.get(key);
    if (prev) {
      if (prev.signed.result.body === r.signed.result.body && prev.signed.ticket.body === r.signed.ticket.body) return 'duplicate';
      this.#conflicts++;
      return 'conflict';
    }
    this.#receipts.set(key, r);
    const tokens = r.result.promptTokens + r.result.completionTokens;
    const server = this.#balance(r.ticket.server);
    server.earned += r.charge;
    server.net += r.charge;
    server.tokensServed += tokens;
    server.jobsServed++;
    const requester = this.#balance(r.ticket.requester);
    requester.spent += r.charge;
    requester.net -= r.charge;
    requester.tokensRequested += tokens;
    requester.jobsRequested++;
    return 'added';
  }

  #balance(peer: string): Balance {
    let b = this.#balances.get(peer);
    if (!b) {
      b = { peer, earned: 0, spent: 0, net: 0, tokensServed: 0, tokensRequested: 0, jobsServed: 0, jobsRequested: 0 };
      this.#balances.set(peer, b);
    }
    return b;
  }

  has(requester: string, job: string): boolean {
    return this.#receipts.has(`${requester}/${job}`);
  }

  balance(peer: string): Balance {
    return { ...(this.#balances.get(peer) ?? { peer, earned: 0, spent: 0, net: 0, tokensServed: 0, tokensRequested: 0, jobsServed: 0, jobsRequested: 0 }) };
  }

  balances(): Balance[] {
    return [...this.#balances.values()].map((b) => ({ ...b }));
  }

  receipts(): VerifiedReceipt[] {
    return [...this.#receipts.values()];
  }

  get size(): number {
    return this.#receipts.size;
  }

  get conflicts(): number {
    return this.#conflicts;
  }
}
