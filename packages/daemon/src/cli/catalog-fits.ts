/**
 * Which example clusters (examples/clusters/) a catalog model fits, as the planner sees it: the model
 * described from its config.json dimensions (models/configs/) at its catalog format's bits, planned with
 * the engine's capabilities for a 4096-token context. Pure apart from reading those files.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { InfeasibleError, parseCluster, plan, type Cluster } from '@orchard/partitioner';
import { describeModel, engineCapabilities } from '../models/describe.js';
import type { CatalogModel } from './catalog.js';

const CLUSTERS_DIR = new URL('../../../../examples/clusters/', import.meta.url);
const CONFIGS_DIR = new URL('../../../../models/configs/', import.meta.url);

/** The example clusters by file name (without .json). */
export function exampleClusters(dir: URL = CLUSTERS_DIR): Map<string, Cluster> {
  const out = new Map<string, Cluster>();
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) out.set(f.replace(/\.json$/, ''), parseCluster(JSON.parse(readFileSync(new URL(f, dir), 'utf8'))));
  return out;
}

/** The clusters `m` fits (a plan exists), at 4.5 bits per weight (MLX 4-bit, group 64); null without a config. */
export async function clustersFitting(m: CatalogModel, clusters = exampleClusters()): Promise<string[] | null> {
  if (!m.config) return null;
  const model = await describeModel(new URL(m.config, CONFIGS_DIR).pathname, { name: m.name, bits: 4 });
  const fits: string[] = [];
  for (const [name, cluster] of clusters) {
    try {
      plan(model.spec, cluster, { contextTokens: 4096, promptTokens: 512, sequences: 1 }, engineCapabilities(model));
      fits.push(name);
    } catch (err) {
      if (!(err instanceof InfeasibleError)) throw err;
    }
  }
  return fits;
}
