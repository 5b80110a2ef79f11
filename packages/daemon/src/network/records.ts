/**
 * What a network node keeps on disk, under `<data-dir>/network/<name>/`:
 *   receipts.jsonl — every receipt this node took part in or heard about, one JSON line each,
 *                    re-verified when read (a damaged line is skipped and counted, never trusted);
 *   lending.json   — the owner's lending policy (written by `orchard lend` through the API).
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_LENDING, lendingPolicySchema, type LendingPolicy } from './lending.js';
import { verifyReceipt, type Receipt, type VerifiedReceipt } from './receipts.js';
import { issueText } from './signed.js';

export class NetworkRecords {
  readonly dir: string;

  constructor(dataDir: string, network: string) {
    this.dir = join(dataDir, 'network', network);
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  get receiptsFile(): string {
    return join(this.dir, 'receipts.jsonl');
  }

  get lendingFile(): string {
    return join(this.dir, 'lending.json');
  }

  appendReceipt(r: Receipt): void {
    appendFileSync(this.receiptsFile, JSON.stringify(r) + '\n', { mode: 0o600 });
  }

  async loadReceipts(): Promise<{ receipts: VerifiedReceipt[]; skipped: number }> {
    if (!existsSync(this.receiptsFile)) return { receipts: [], skipped: 0 };
    const receipts: VerifiedReceipt[] = [];
    let skipped = 0;
    for (const line of readFileSync(this.receiptsFile, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      let doc: unknown;
      try {
        doc = JSON.parse(line);
      } catch {
        skipped++;
        continue;
      }
      const v = await verifyReceipt(doc);
      if (v.ok) receipts.push(v.receipt);
      else skipped++;
    }
    return { receipts, skipped };
  }

  /** The saved policy, or the default (lending off) when none was saved. A damaged file is an error naming it. */
  loadLending(): LendingPolicy {
    if (!existsSync(this.lendingFile)) return { ...DEFAULT_LENDING };
    let doc: unknown;
    try {
      doc = JSON.parse(readFileSync(this.lendingFile, 'utf8'));
    } catch (err) {
      throw new Error(`${this.lendingFile}: not JSON (${(err as Error).message}); fix or delete it (lending is then off)`);
    }
    const parsed = lendingPolicySchema.safeParse({ ...DEFAULT_LENDING, ...(doc as object) });
    if (!parsed.success) throw new Error(`${this.lendingFile}: ${issueText(parsed.error)}; fix or delete it (lending is then off)`);
    return parsed.data;
  }

  saveLending(policy: LendingPolicy): void {
    const tmp = `${this.lendingFile}.tmp`;
    writeFileSync(tmp, JSON.stringify(policy, null, 2) + '\n', { mode: 0o600 });
    renameSync(tmp, this.lendingFile);
  }
}
