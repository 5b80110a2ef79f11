/**
 * llama.cpp's GPU build in a child process of the GPU benchmark (forked by bench/gpu.ts). A child
 * because node-llama-cpp loads one native build per process (the CPU lines of bench:engine already
 * loaded the CPU one), and because ggml's Vulkan device selection is read from this process's
 * environment (GGML_VK_VISIBLE_DEVICES, VK_ICD_FILENAMES), which the parent sets for the child only.
 *
 * Messages in: {open: {gguf, options}}, {round: true}, {close: true}. Out: {opened}, {speeds}, {closed},
 * or {error: message} after any of them.
 */
import { llamaRunner, type RunnerOptions } from './llama-cpp.js';

type In = { open: { gguf: string; options: RunnerOptions } } | { round: true } | { close: true };
let runner: Awaited<ReturnType<typeof llamaRunner>> | null = null;

const send = (m: unknown) => process.send!(m);

process.on('message', (m: In) => {
  void (async () => {
    try {
      if ('open' in m) {
        runner = await llamaRunner(m.open.gguf, m.open.options);
        send({ opened: true });
      } else if ('round' in m) {
        if (!runner) throw new Error('no model open');
        send({ speeds: await runner.round() });
      } else {
        await runner?.dispose();
        runner = null;
        send({ closed: true });
      }
    } catch (err) {
      send({ error: (err as Error).message });
    }
  })();
});
