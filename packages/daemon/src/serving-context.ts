/**
 * The context an instance serves: the model's own (config.json `max_position_embeddings`), capped so a
 * long-context model does not reserve a KV cache bigger than a desk machine holds. One function, used
 * by the instance manager (the executor's limit) and the dashboard (what it shows).
 */
export const MAX_SERVING_CONTEXT = 4096;

export function servingContext(maxPositionEmbeddings: number, cap = MAX_SERVING_CONTEXT): number {
  return Math.min(cap, maxPositionEmbeddings, MAX_SERVING_CONTEXT);
}
