/** The tool-call formats Orchard reads, and which one a chat template speaks. */
import type { ToolCallFormat } from './format.js';
import { deepseekV3, deepseekV31 } from './formats/deepseek.js';
import { commandR } from './formats/command-r.js';
import { functionaryV31, functionaryV32 } from './formats/functionary.js';
import { glm } from './formats/glm.js';
import { granite } from './formats/granite.js';
import { harmony } from './formats/harmony.js';
import { hermes } from './formats/hermes.js';
import { kimiK2 } from './formats/kimi.js';
import { llama3 } from './formats/llama3.js';
import { mistral } from './formats/mistral.js';
import { qwen3Coder } from './formats/qwen3-coder.js';
import { seedOss } from './formats/seed-oss.js';

/**
 * Most specific first: a template can mention another format's markers in passing (Hermes on Llama 3
 * has both), and Qwen3-Coder and GLM wrap calls in Hermes's <tool_call> with other insides. Seed-OSS
 * writes Qwen3-Coder's insides in its own wrapper; Functionary's templates are Llama 3 ones.
 */
export const TOOL_CALL_FORMATS: readonly ToolCallFormat[] = [
  harmony, kimiK2, deepseekV3, deepseekV31, mistral, seedOss, qwen3Coder, glm, granite, commandR, functionaryV32, functionaryV31, hermes, llama3,
];

export function detectToolCallFormat(template: string | null): ToolCallFormat | null {
  if (!template) return null;
  return TOOL_CALL_FORMATS.find((f) => f.detect(template)) ?? null;
}
