import { deepseekV3 } from './deepseek-v3.js';
import { gptOss } from './gpt-oss.js';
import { llama } from './llama.js';
import { mistral } from './mistral.js';
import { mixtral } from './mixtral.js';
import { qwen2 } from './qwen2.js';
import { qwen3 } from './qwen3.js';
import { qwen3Moe } from './qwen3-moe.js';
import type { ArchitectureCaps } from './types.js';

const REGISTRY = new Map<string, ArchitectureCaps>([llama, mistral, qwen2, qwen3, qwen3Moe, mixtral, deepseekV3, gptOss].map((a) => [a.name, a]));

/** Capabilities for `name`, or undefined when the engine does not run it. */
export function lookupArchitecture(name: string): ArchitectureCaps | undefined {
  return REGISTRY.get(name);
}

/** Architectures the engine runs. */
export function supportedArchitectures(): string[] {
  return [...REGISTRY.keys()];
}
