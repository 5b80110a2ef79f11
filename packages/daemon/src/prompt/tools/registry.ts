/** The tool-call formats Orchard reads, and which one a chat template speaks. */
import type { ToolCallFormat } from './format.js';
import { deepseekV3, deepseekV31 } from './formats/deepseek.js';
import { glm } from './formats/glm.js';
import { harmony } from './formats/harmony.js';
import { hermes } from './formats/hermes.js';
import { kimiK2 } from './formats/kimi.js';
import { llama3 } from './formats/llama3.js';
import { mistral } from './formats/mistral.js';
import { qwen3Coder } from './formats/qwen3-coder.js';

/**
 * Most specific first: a template can mention another format's markers in passing (Hermes on Llama 3
 * has both), and Qwen3-Coder and GLM wrap calls in Hermes's <tool_call> with other insides.
 */
export const TOOL_CALL_FORMATS: readonly ToolCallFormat[] = [harmony, kimiK2, deepseekV3, deepseekV31, mistral, qwen3Coder, glm, hermes, llama3];

export function detectToolCallFormat(template: string | null): ToolCallFormat | null {
  if (!template) return null;
  return TOOL_CALL_FORMATS.find((f) => f.detect(template)) ?? null;
}
