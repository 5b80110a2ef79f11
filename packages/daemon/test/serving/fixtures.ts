/** Model descriptions for pure serving tests: what describeModel would make of a config, sized as asked. */
import { modelFromConfig } from '@orchard/partitioner';
import type { ModelDescription } from '../../src/models/description.js';

export function description(o: { layers?: number; heads?: number; kvHeads?: number; intermediate?: number; vocab?: number; weightsBytes?: number; maxContext?: number; name?: string } = {}): ModelDescription {
  const dims = { numLayers: o.layers ?? 8, numHeads: o.heads ?? 8, numKvHeads: o.kvHeads ?? 4, intermediateSize: o.intermediate ?? 512, vocabSize: o.vocab ?? 256 };
  const spec = modelFromConfig(
    {
      architectures: ['LlamaForCausalLM'],
      hidden_size: dims.numHeads * 16,
      intermediate_size: dims.intermediateSize,
      num_hidden_layers: dims.numLayers,
      num_attention_heads: dims.numHeads,
      num_key_value_heads: dims.numKvHeads,
      vocab_size: dims.vocabSize,
      tie_word_embeddings: false,
      torch_dtype: 'float16',
    },
    { name: o.name ?? 'test-model' },
  );
  if (o.weightsBytes !== undefined) spec.totalBytes = o.weightsBytes;
  return { spec, dims, maxContext: o.maxContext ?? 4096 };
}
