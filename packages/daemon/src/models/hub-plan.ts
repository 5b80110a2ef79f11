/**
 * What pulling a hub model would give this pod, before a byte of weights moves (the dashboard's
 * Download form asks first): the model described from its small files and headers (describe-hub.ts,
 * a GGUF repo from its chosen file's header), the engine's verdict, and the planner's plan on the
 * pod as it is now — fits or not, and the bytes each node would hold.
 */
import { InfeasibleError, plan as planModel, type Cluster } from '@orchard/partitioner';
import { ModelFormatError, UnsupportedModelError } from '@orchard/engine';
import { ModelRefusedError } from '../store/errors.js';
import { planRequestOf, servingProfile } from '../serving/profile.js';
import type { HubClient } from '../store/hub.js';
import { describeHubModel } from './describe-hub.js';
import { engineCapabilities } from './describe.js';

export interface HubPlanNode {
  node: string;
  name: string | null;
  /** Weights this node would hold. */
  weightsBytes: number;
  /** Weights, KV cache, workspace and headroom together. */
  totalBytes: number;
  availableBytes: number;
}

export interface HubPlan {
  repo: string;
  /** The engine loads it (false: `reason` says why, and a pull would be refused). */
  loadable: boolean;
  /** The pod as it is now can serve it. */
  fits: boolean;
  weightsBytes: number;
  strategy: string | null;
  nodes: HubPlanNode[];
  decodeTokensPerSecond: number | null;
  /** Why it does not load or does not fit. */
  reason: string | null;
}

export async function planHubModel(repoAndQuant: string, o: { hub: HubClient; cluster: Cluster; names?: Map<string, string>; signal?: AbortSignal }): Promise<HubPlan> {
  const [repo, quant] = repoAndQuant.split(':');
  const none = { repo: repoAndQuant, strategy: null, nodes: [], decodeTokensPerSecond: null };
  let model;
  try {
    model = await describeHubModel(repo, { hub: o.hub, quant, signal: o.signal });
  } catch (err) {
    // A file the engine cannot read at all (a GGUF header it refuses): not loadable, said why.
    if (err instanceof ModelRefusedError || err instanceof UnsupportedModelError || err instanceof ModelFormatError) return { ...none, weightsBytes: 0, loadable: false, fits: false, reason: err.message };
    throw err;
  }
  const weightsBytes = model.spec.totalBytes;
  if (model.unsupported) return { ...none, weightsBytes, loadable: false, fits: false, reason: model.unsupported };
  try {
    const p = planModel(model.spec, o.cluster, planRequestOf(servingProfile(model)), engineCapabilities(model));
    const nodes = Object.entries(p.memory).map(([node, m]) => ({ node, name: o.names?.get(node) ?? null, weightsBytes: m.weightsBytes, totalBytes: m.totalBytes, availableBytes: m.availableBytes }));
    return { ...none, weightsBytes, loadable: true, fits: true, strategy: p.strategy, nodes, decodeTokensPerSecond: p.predicted.decodeTokensPerSecond, reason: null };
  } catch (err) {
    if (!(err instanceof InfeasibleError)) throw err;
    return { ...none, weightsBytes, loadable: true, fits: false, reason: err.message };
  }
}
