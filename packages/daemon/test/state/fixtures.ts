import type { LinkMeasurement } from '../../src/links/types.js';
import { modelFromConfig } from '@orchard/partitioner';
import type { NodeProfile } from '../../src/profile/types.js';
import type { PlacedPlan } from '../../src/state/placed-plan.js';

export function profile(peerId: string, name = peerId, over: Partial<NodeProfile> = {}): NodeProfile {
  return {
    peerId,
    name,
    hostname: `${name}.local`,
    os: { platform: 'linux', release: '6.1', arch: 'x64' },
    chip: 'Test CPU',
    cpu: { cores: 4, performanceCores: null, efficiencyCores: null },
    gpuCores: null,
    memory: { totalBytes: 16 * 2 ** 30, availableBytes: 12 * 2 ** 30 },
    diskFreeBytes: 100 * 2 ** 30,
    interfaces: [{ name: 'eth0', kind: 'ethernet', ipv4: ['10.0.0.1/24'], ipv6: [] }],
    thunderbolt: [],
    rdma: { enabled: null, devices: [] },
    capability: { memoryBandwidthGBps: 10, matmulGflops: 5, method: 'test', measuredAt: 1 },
    probePort: 4000,
    updatedAt: 1,
    ...over,
  };
}

export function link(a: string, b: string, over: Partial<LinkMeasurement> = {}): LinkMeasurement {
  return {
    a,
    b,
    kind: 'ethernet',
    aInterface: 'eth0',
    bInterface: 'eth0',
    address: '10.0.0.2',
    rdmaCapable: false,
    latencyUs: 100,
    bandwidthGbps: 1,
    measuredAt: 1,
    measuredBy: a,
    ...over,
  };
}

/** A placed plan as the coordinator writes it: a one-node instance of a small model on `node`. */
export function placedPlan(node: string, over: Partial<PlacedPlan> = {}): PlacedPlan {
  const spec = modelFromConfig({ architectures: ['LlamaForCausalLM'], hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 256 }, { name: 'm' });
  return {
    strategy: 'single',
    layout: { stages: [[0, 2]], tensor: 1 },
    ranks: [node],
    predicted: null,
    explanation: [],
    secret: '0'.repeat(64),
    requested: { strategy: 'auto' },
    model: { spec, dims: { numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 128, vocabSize: 256 }, maxContext: 128 },
    context: 128,
    ...over,
  };
}
