/**
 * `orchard chat` as a person uses it: in a pseudo-terminal (tmux), ten questions to the bundled
 * model, loaded with a 128-token context (`orchard load --context 128`; the model holds 2048). The
 * conversation outgrows the context after a couple of turns; the chat must leave
 * out old turns with a note, say when an answer was cut, refuse a message too long for any window
 * with a one-line error, and never exit.
 */
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Orchard } from '../../src/orchard.js';
import { runCli, startServingDaemon, waitFor } from '../serve/in-process-pod.js';
import { startTmux, tmuxAvailable, type TmuxSession } from './tmux.js';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '../../src/cli/main.ts');

describe.skipIf(!tmuxAvailable())('orchard chat in a terminal', () => {
  let daemon: Orchard;
  let dataDir: string;
  let term: TmuxSession | undefined;
  beforeAll(async () => {
    ({ daemon, dataDir } = await startServingDaemon({ tmpPrefix: 'orchard-chat-pty-', bootstrap: [] }));
    const url = `http://127.0.0.1:${daemon.apiPort}`;
    await waitFor('the node in the pod', async () => ((await (await fetch(`${url}/api/cluster`)).json()) as { nodes: unknown[] }).nodes.length > 0 || undefined, 30_000, 100);
    const load = await runCli(['load', 'orchard-demo', '--context', '128', '--json', '--url', url]);
    if (load.code !== 0) throw new Error(`orchard load --context 128 failed: ${load.stderr}`);
  }, 180_000);
  afterAll(async () => {
    term?.kill();
    await daemon?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('survives ten turns with the model at 128 tokens of context: old turns left out with a note, cut answers said', async () => {
    term = startTmux([process.execPath, '--import', 'tsx', CLI, 'chat', 'orchard-demo', '--url', `http://127.0.0.1:${daemon.apiPort}`, '--max-tokens', '40', '--temperature', '0'], { NO_COLOR: '1' });
    await waitFor('the chat banner', () => /chatting with orchard-demo/.test(term!.screen()) || undefined, 90_000, 100);
    // Each turn ends with a statistics line or an error line on the terminal.
    const ends = () => (term!.screen().match(/^\[\d+ tokens, |^orchard: /gm) ?? []).length;
    for (let i = 1; i <= 10; i++) {
      term.type(`And the LORD spake unto Moses, saying ${i}`);
      await waitFor(`the answer to question ${i}`, () => ends() >= i || term!.ended() || undefined, 120_000, 100);
      expect(term.ended(), term.screen()).toBe(false);
    }
    const screen = term.screen();
    expect(screen).not.toMatch(/^orchard: /m);
    expect(screen).toMatch(/left out \d+ more old turns? to fit the model's context of 128 tokens/);
    expect(screen.match(/^\[\d+ tokens, /gm)).toHaveLength(10);
    expect(screen).toMatch(/\(the answer was cut off at the limit of 40 tokens per answer\)/);
    // A message that cannot fit any window is an error line, and the chat goes on.
    term.type('behold '.repeat(30));
    await waitFor('the too-long message to be refused', () => /^orchard: your message is about \d+ tokens, too long for the model's context of 128 tokens/m.test(term!.screen()) || undefined, 60_000, 100);
    term.type('And God said');
    await waitFor('an answer after the error', () => ends() >= 12 || undefined, 60_000, 100);
    expect(term.ended()).toBe(false);
    term.type('/exit');
    await waitFor('the chat to end on /exit', () => term!.ended() || undefined, 60_000, 100);
    if (process.env.ORCHARD_SHOW_PTY) console.log(screen);
    // Ended without an error line; the status when tmux reports one (under vitest it sometimes marks
    // the pane dead and never learns the status).
    expect(term.screen().split('/exit').at(-1)).not.toMatch(/orchard: |Error/);
    const code = term.exited();
    if (code !== null) expect(code, term.screen()).toBe(0);
  }, 400_000);

  it('/help and unknown slash commands are answered by the chat, not sent to the model', async () => {
    const help = startTmux([process.execPath, '--import', 'tsx', CLI, 'chat', 'orchard-demo', '--url', `http://127.0.0.1:${daemon.apiPort}`, '--max-tokens', '8', '--temperature', '0'], { NO_COLOR: '1' });
    try {
      await waitFor('the chat banner', () => /chatting with orchard-demo/.test(help.screen()) || undefined, 90_000, 100);
      const answers = () => (help.screen().match(/^\[\d+ tokens, /gm) ?? []).length;
      help.type('/help');
      await waitFor('the command list', () => /^ {2}\/exit, \/quit/m.test(help.screen()) || undefined, 30_000, 100);
      help.type('/frobnicate');
      await waitFor('the unknown command named', () => /unknown command \/frobnicate/.test(help.screen()) || undefined, 30_000, 100);
      // One real question: its answer is the only one on the screen, so neither command reached the model.
      help.type('And God said');
      await waitFor('the answer', () => answers() >= 1 || undefined, 120_000, 100);
      expect(answers(), help.screen()).toBe(1);
      expect(help.screen()).toMatch(/^\[\d+ tokens, .*first token \d+ ms\]/m);
      help.type('/exit');
      await waitFor('the chat to end on /exit', () => help.ended() || undefined, 60_000, 100);
    } finally {
      help.kill();
    }
  }, 300_000);
});
