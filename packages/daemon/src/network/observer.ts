/**
 * Listening to a network's gossip: offers into the offer book, receipts into the ledger, each
 * verified first and dropped (logged at debug with its sender) when it does not check out. Members
 * and relays both run one; a relay's is what `orchard relay` reports.
 */
import type { Logger } from 'pino';
import { Ledger, type LedgerAdd } from './ledger.js';
import { OfferBook } from './offer-book.js';
import { verifyOffer } from './offer.js';
import { verifyReceipt, type VerifiedReceipt } from './receipts.js';
import { MAX_SIGNED_BODY } from './signed.js';
import { offersTopic, receiptsTopic, type WideNode } from './wide-node.js';

const decoder = new TextDecoder();
const encoder = new TextEncoder();

export class NetworkObserver {
  readonly network: string;
  readonly book = new OfferBook();
  readonly ledger: Ledger;
  readonly #node: WideNode;
  readonly #log: Logger;
  readonly #now: () => number;
  #dropped = 0;

  constructor(node: WideNode, network: string, log: Logger, now: () => number) {
    this.#node = node;
    this.network = network;
    this.#log = log;
    this.#now = now;
    this.ledger = new Ledger(network);
  }

  /** Subscribes to the network's topics; call before the node starts. */
  attach(): void {
    const pubsub = this.#node.services.pubsub;
    const offers = offersTopic(this.network);
    const receipts = receiptsTopic(this.network);
    pubsub.subscribe(offers);
    pubsub.subscribe(receipts);
    pubsub.addEventListener('message', (evt) => {
      const msg = evt.detail;
      if (msg.type !== 'signed' || (msg.topic !== offers && msg.topic !== receipts)) return;
      const from = msg.from.toString();
      if (msg.data.length > 4 * MAX_SIGNED_BODY) return this.#drop(from, `${msg.data.length} bytes`);
      let json: unknown;
      try {
        json = JSON.parse(decoder.decode(msg.data));
      } catch {
        return this.#drop(from, 'not JSON');
      }
      void (msg.topic === offers ? this.#onOffer(json, from) : this.#onReceipt(json, from));
    });
  }

  async #onOffer(json: unknown, from: string): Promise<void> {
    const checked = await verifyOffer(json, { network: this.network, now: this.#now(), from });
    if (!checked.ok) return this.#drop(from, checked.reason);
    if (this.book.add(checked.offer, this.#now()) === 'added') this.#log.info({ peer: from, pod: checked.offer.body.pod.name, models: checked.offer.body.models.map((m) => m.name) }, 'network peer offers');
  }

  async #onReceipt(json: unknown, from: string): Promise<void> {
    const v = await verifyReceipt(json);
    if (!v.ok) return this.#drop(from, v.reason);
    this.keep(v.receipt, false);
  }

  #drop(from: string, reason: string): void {
    this.#dropped++;
    this.#log.debug({ peer: from, reason }, 'dropped network message');
  }

  /** Adds a verified receipt to the ledger, and announces it when `publish` (a job this node took part in). */
  keep(r: VerifiedReceipt, publish: boolean): LedgerAdd {
    const added = this.ledger.add(r);
    if (added === 'added' && publish) {
      void this.#node.services.pubsub.publish(receiptsTopic(this.network), encoder.encode(JSON.stringify(r.signed))).catch((err: Error) => this.#log.debug({ err: err.message }, 'receipt not published'));
    }
    return added;
  }

  get dropped(): number {
    return this.#dropped;
  }
}
