/**
 * Speculative decoding lines of bench:engine (the `spec` group): the bundled demo model (wasm backend)
 * decoding plainly and with prompt-lookup drafts (generate's promptLookup, draft lengths chosen by
 * DraftPolicy), alternating, best of rounds each; the outputs must be identical or the bench fails.
 * Ratio: speculative / plain decode tok/s in this run; with --threads 1 (the kernels then run on the
 * main thread) each line has a `-cpu` twin: plain / speculative CPU time of the whole run (prompt
 * included), which a loaded machine disturbs far less than wall time. The acceptance is logged.
 *
 * - spec-decode-toolcall: an agent conversation that asks again what it asked before; the model re-issues
 *   its tool call, most of which the prompt already holds (a retrieval workload, and the demo model's
 *   real use: its training taught it to copy names and arguments from the prompt).
 * - spec-decode-cycle: a prompt inside the loop the model's greedy decode falls into: nearly every drafted
 *   token is accepted, so this is the most speculation can give on this backend.
 * - spec-decode-cycle-q8_0: the same on the demo model converted to a Q8_0 GGUF: its matmul kernels share
 *   more of a step between rows than f16's (16 rows cost ~6x one row against ~9.5x), so verify rows are cheaper.
 * - spec-decode-repetitive: a prompt that repeats one verse, decoded to the end of the context (2048):
 *   past a few hundred tokens a verify row costs about a decode step, and the policy mostly stops drafting.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWasmBackend } from '../src/kernels/wasm/backend.js';
import type { SimdBuild } from '../src/kernels/wasm/module.js';
import type { ChatMessage, ToolDefinition } from '../src/tokenizer/chat-template.js';
import type { ModelTokenizer } from '../src/tokenizer/load.js';
import type { EngineBenchLine } from './engine.js';
import { ggufsOf } from './models.js';

interface Workload {
  name: string;
  prompt: number[];
  maxTokens: number;
  /** Stop at the model's end of turn (a chat reply), else decode to maxTokens. */
  stopAtEos: boolean;
  /** Extra rounds: short replies are a few ms and noise decides the best of few. */
  rounds: number;
}

const DRAFT_TOKENS = 15;

export async function specDecodeLines(demoDir: string, o: { threads: number; rounds: number; simd: SimdBuild }, log: (s: string) => void): Promise<EngineBenchLine[]> {
  const { loadTokenizer } = await import('../src/format/tokenizer.js');
  const tokenizer = loadTokenizer(demoDir);
  const verse = 'Let there be light: and there was light. ';
  const repetitive = tokenizer.encode(verse + verse + 'Let');
  const cycle = tokenizer.encode('the LORD of the LORD of the LORD of the LORD of the LORD of');
  const lines = await measureLines(demoDir, o, log, (maxSeqLen) => [
    { name: 'spec-decode-toolcall', prompt: tokenizer.encode(toolCallPrompt(tokenizer)), maxTokens: 200, stopAtEos: true, rounds: o.rounds + 12 },
    { name: 'spec-decode-cycle', prompt: cycle, maxTokens: 200, stopAtEos: false, rounds: o.rounds + 8 },
    { name: 'spec-decode-repetitive', prompt: repetitive, maxTokens: maxSeqLen - repetitive.length - 1, stopAtEos: false, rounds: o.rounds + 4 },
  ]);
  // The Q8_0 GGUF is converted afresh each run, into a directory removed after.
  const dir = mkdtempSync(join(tmpdir(), 'orchard-bench-spec-'));
  try {
    const gguf = ggufsOf(demoDir, dir, () => {}, ['q8_0'] as const).q8_0;
    lines.push(...(await measureLines(gguf, o, log, () => [{ name: 'spec-decode-cycle-q8_0', prompt: cycle, maxTokens: 200, stopAtEos: false, rounds: o.rounds + 8 }])));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return lines;
}

/** Plain and speculative decode of each workload on the model at `path`, alternating, best of rounds. */
async function measureLines(path: string, o: { threads: number; simd: SimdBuild }, log: (s: string) => void, workloadsOf: (maxSeqLen: number) => Workload[]): Promise<EngineBenchLine[]> {
  const { loadInProcessModel } = await import('../src/drivers/in-process.js');
  const { generate } = await import('../src/generate/generate.js');
  const model = loadInProcessModel(path, { maxBatch: DRAFT_TOKENS + 1, backend: () => createWasmBackend({ threads: o.threads, simd: o.simd }) });
  try {
    const lines: EngineBenchLine[] = [];
    for (const w of workloadsOf(model.maxSeqLen)) {
      const stop = w.stopAtEos ? {} : { stopTokenIds: [] };
      const run = async (speculate: boolean) => {
        const c0 = process.cpuUsage();
        const r = await generate(model, w.prompt, { maxTokens: w.maxTokens, ...stop, ...(speculate ? { promptLookup: { draftTokens: DRAFT_TOKENS } } : {}) });
        const cpu = process.cpuUsage(c0);
        return { r, cpuMs: (cpu.user + cpu.system) / 1000 };
      };
      let plain = 0;
      let spec = 0;
      let plainCpu = Infinity;
      let specCpu = Infinity;
      let accepted = 0;
      let drafted = 0;
      let tokens = 0;
      for (let r = 0; r < w.rounds; r++) {
        const a = await run(false);
        const b = await run(true);
        if (a.r.tokens.join() !== b.r.tokens.join()) throw new Error(`${w.name}: speculation changed the output`);
        plain = Math.max(plain, a.r.tokensPerSecond);
        spec = Math.max(spec, b.r.tokensPerSecond);
        plainCpu = Math.min(plainCpu, a.cpuMs);
        specCpu = Math.min(specCpu, b.cpuMs);
        ({ accepted, drafted } = b.r.speculation!);
        tokens = b.r.tokens.length;
      }
      log(
        `${w.name} (demo model${path.endsWith('.gguf') ? ', Q8_0 GGUF' : ''}, ${w.prompt.length}-token prompt, ${tokens} tokens, identical output): ${spec.toFixed(0)} vs plain ${plain.toFixed(0)} tok/s (${(spec / plain).toFixed(2)}x), ` +
          `${accepted}/${drafted} drafted tokens accepted; CPU time plain / speculative ${(plainCpu / specCpu).toFixed(2)}x (whole run, prompt included)`,
      );
      lines.push({ name: w.name, orchard: round3(spec), llamacpp: null, unit: 'tok/s', ratio: round3(spec / plain) });
      // One thread: the same comparison in CPU time, which a loaded machine disturbs far less than wall time.
      if (o.threads === 1) lines.push({ name: `${w.name}-cpu`, orchard: round3((tokens * 1000) / specCpu), llamacpp: null, unit: 'tok/cpu-s', ratio: round3(plainCpu / specCpu) });
    }
    return lines;
  } finally {
    model.dispose();
  }
}

/** A conversation whose last question repeats the first: the reply's tool call is mostly in the prompt. */
function toolCallPrompt(tokenizer: ModelTokenizer): string {
  const tools: ToolDefinition[] = [
    {
      type: 'function',
      function: { name: 'get_weather', description: 'Get the current weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    },
  ];
  const call = (city: string, id: string): ChatMessage => ({ role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'get_weather', arguments: { city } } }] });
  const messages: ChatMessage[] = [
    { role: 'user', content: 'What is the weather in Oslo?' },
    call('Oslo', 'c1'),
    { role: 'tool', content: '{"city": "Oslo", "weather": "snowing", "temperature": -3}', tool_call_id: 'c1' },
    { role: 'assistant', content: 'It is snowing in Oslo, -3 degrees.' },
    { role: 'user', content: 'What is the weather in Oslo?' },
  ];
  return tokenizer.applyChatTemplate(messages, { tools });
}

const round3 = (v: number) => Number(v.toPrecision(4));
