/** What `orchard --help` and `orchard COMMAND --help` add to commander's text: examples, colours. */
import type { Command, HelpConfiguration } from 'commander';
import { paintOut } from '../colors.js';

/** Examples per command, shown after its options; keys are command paths ("service install"). */
const EXAMPLES: Record<string, string[]> = {
  '': [
    'orchard start                         # run the daemon here (dashboard: http://127.0.0.1:52415)',
    'orchard chat                          # chat with the bundled demo model',
    'orchard run Qwen/Qwen2.5-0.5B-Instruct  # pull, place on the pod and chat, in one command',
    'orchard status                        # the pod: machines, links, models',
    'orchard doctor                        # what is missing on this machine, and how to fix it',
  ],
  start: ['orchard start', 'orchard start --cluster-key ~/pod.key --name studio', 'orchard start --api-host 0.0.0.0 --api-token s3cret', 'orchard start --log-format json'],
  chat: ['orchard chat', 'orchard chat Qwen/Qwen2.5-0.5B-Instruct --system "Answer briefly."', 'orchard chat orchard-demo -m "In the beginning"'],
  run: [
    'orchard run Qwen/Qwen2.5-0.5B-Instruct           # pull if needed, place on the pod, chat',
    'orchard run ./my-model --prompt "Once upon a time"  # one answer, in this process',
    'orchard run --model models/orchard-demo --prompt "In the beginning" --pipeline 2',
  ],
  pull: ['orchard pull Qwen/Qwen2.5-0.5B-Instruct', 'orchard pull qwen2.5-0.5b                 # a short name from `orchard models --available`', 'orchard pull Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0  # one GGUF file', 'HF_TOKEN=hf_... orchard pull meta-llama/Llama-3.2-1B'],
  load: ['orchard load orchard-demo', 'orchard load Qwen/Qwen2.5-0.5B-Instruct --strategy pipeline --nodes 2'],
  models: ['orchard models', 'orchard models --available'],
  plan: ['orchard plan --model models/orchard-demo --cluster examples/clusters/two-macs.json', 'orchard plan qwen3-30b-a3b --machine m4-pro-64      # before any download, for a Mac you name', 'orchard plan deepseek-v3.1 --machine m3-ultra-512x2  # two alike, Thunderbolt 5 (TCP)', 'orchard plan unsloth/Qwen3-30B-A3B-GGUF:Q4_K_M --machine m4-pro-64  # a GGUF repo, from its header'],
  logs: ['orchard logs -f', 'orchard logs -n 500'],
  'service install': ['orchard service install', 'orchard service install --name studio --cluster-key ~/pod.key'],
};

function examplesText(lines: string[]): string {
  return `\n${paintOut.bold('Examples:')}\n${lines.map((l) => `  ${paintOut.dim('$')} ${l}`).join('\n')}\n`;
}

function pathOf(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/** Titles and command names in colour (only when stdout is a terminal that wants them). */
export const helpStyle: HelpConfiguration = {
  styleTitle: (s) => paintOut.bold(s),
  styleCommandText: (s) => paintOut.cyan(s),
  styleSubcommandText: (s) => paintOut.cyan(s),
  styleOptionText: (s) => paintOut.green(s),
};

/** Adds the examples above to `program` and its commands (after they are registered). */
export function addExamples(program: Command): void {
  const visit = (cmd: Command) => {
    const lines = EXAMPLES[pathOf(cmd)];
    if (lines) cmd.addHelpText('after', examplesText(lines));
    cmd.commands.forEach(visit);
  };
  visit(program);
}
