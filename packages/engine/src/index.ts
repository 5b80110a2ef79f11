export type { ShardSpec, AllReduce } from './shard.js';
