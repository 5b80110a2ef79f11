/**
 * A model described from the hub before any download (`orchard plan --model ORG/NAME`): config.json,
 * generation_config.json and the safetensors index fetched whole, each weight file known by its header
 * (range requests), and the same description as a local directory gets (describe.ts). A GGUF-only
 * repo is described from the header of the file `orchard pull` would choose (`ORG/NAME:QUANT` names
 * one), fetched by range. Nothing but those small files and headers is fetched.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ModelFormatError, SafetensorsFile } from '@orchard/engine';
import os from 'node:os';
import { readHubHeader, withGgufHeaders } from '../store/check-before-pull.js';
import { pickGguf } from '../store/gguf-pick.js';
import { StoreError } from '../store/errors.js';
import { validateRepoId, type HubClient, type HubFile } from '../store/hub.js';
import { describeModel } from './describe.js';
import type { ModelDescription } from './description.js';

const SMALL_FILES = ['config.json', 'generation_config.json', 'model.safetensors.index.json'];

export interface DescribeHubOptions {
  hub: HubClient;
  revision?: string;
  bits?: number;
  /** A GGUF repo's quantisation (`ORG/NAME:Q4_K_M`); without it, the file `orchard pull` picks on this machine. */
  quant?: string;
  /** With no quant: the memory a GGUF must fit, as `orchard pull` picks. @default 75% of this machine's memory */
  budgetBytes?: number;
  signal?: AbortSignal;
}

export async function describeHubModel(repo: string, o: DescribeHubOptions): Promise<ModelDescription> {
  validateRepoId(repo);
  const hub = o.hub;
  const listing = await hub.listRepo(repo, o.revision ?? 'main', o.signal);
  const top = listing.files.filter((f) => !f.path.includes('/'));
  if (!top.some((f) => f.path === 'config.json')) {
    if (!listing.files.some((f) => f.path.toLowerCase().endsWith('.gguf'))) throw new StoreError(`${repo}: the repo has no config.json, so there is nothing to plan from`);
    // One file, or a split set's parts (a folder per quantisation in the large repos): every part's header.
    const files = pickGguf(repo, listing.files, { quant: o.quant, budgetBytes: o.budgetBytes ?? Math.floor(os.totalmem() * 0.75) });
    const range = (file: HubFile, start: number, end: number) => hub.readRange(repo, listing.commit, file.path, start, end, o.signal);
    return withGgufHeaders(repo, files, range, (path) => describeModel(path, { name: repo, bits: o.bits }));
  }
  const dir = mkdtempSync(join(tmpdir(), 'orchard-hub-describe-'));
  try {
    for (const f of top.filter((f) => SMALL_FILES.includes(f.path))) writeFileSync(join(dir, f.path), await hub.readFile(repo, listing.commit, f.path, undefined, o.signal));
    const weights = top.filter((f) => f.path.endsWith('.safetensors'));
    const headers = new Map<string, SafetensorsFile>();
    for (const f of weights) headers.set(f.path, SafetensorsFile.fromHeader(join(dir, f.path), await readHubHeader(hub, repo, listing.commit, f, o.signal), f.size));
    const openFile = (name: string) => {
      const f = headers.get(name);
      if (!f) throw new ModelFormatError(`model.safetensors.index.json: names ${name}, which the repo does not hold`, join(dir, 'model.safetensors.index.json'), name);
      return f;
    };
    const headerSizes = [...headers.values()].flatMap((f) => [...f.tensors].map(([name, t]) => ({ name, bytes: t.dataOffsets[1] - t.dataOffsets[0] })));
    return await describeModel(dir, { name: repo, bits: o.bits, ...(weights.length && { openFile, headerSizes }) });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
