export type { Group, OpOptions, ReduceOp, ReducibleBuffer } from './group.js';
