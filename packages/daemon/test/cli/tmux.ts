/**
 * A command in a real pseudo-terminal, through tmux: type into it, read the screen and scroll-back,
 * see whether it exited. tmux is a Debian package (scripts/test.sh installs it); suites skip when it
 * is missing.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/** Whether tmux runs here; with ORCHARD_REQUIRE_TMUX_TESTS=1 (CI) its absence is an error instead of a skip. */
export function tmuxAvailable(): boolean {
  const ok = spawnSync('tmux', ['-V']).status === 0;
  if (!ok && process.env.ORCHARD_REQUIRE_TMUX_TESTS === '1') throw new Error('ORCHARD_REQUIRE_TMUX_TESTS=1 but tmux is not installed (Debian package tmux)');
  return ok;
}

export interface TmuxSession {
  /** Types `text` and presses Enter. */
  type(text: string): void;
  /** The whole scroll-back and screen, lines joined by \n (wrapped lines joined back). */
  screen(): string;
  /** Exit status when the command has ended (128 + n after signal n), else null. */
  exited(): number | null;
  /** Whether the command has ended, with or without an exit status (tmux does not always learn it). */
  ended(): boolean;
  kill(): void;
}

export function startTmux(command: string[], env: Record<string, string> = {}, size = { cols: 160, rows: 50 }): TmuxSession {
  const socket = `orchard-test-${process.pid}-${randomBytes(3).toString('hex')}`;
  const tmux = (...args: string[]) => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
  const quoted = command.map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  const exports = Object.entries(env).map(([k, v]) => `${k}='${v.replace(/'/g, `'\\''`)}'`).join(' ');
  tmux('-f', '/dev/null', 'new-session', '-d', '-s', 't', '-x', String(size.cols), '-y', String(size.rows), `env ${exports} ${quoted}`, ';', 'set-option', '-g', 'remain-on-exit', 'on', ';', 'set-option', '-g', 'history-limit', '20000');
  return {
    type(text) {
      tmux('send-keys', '-t', 't', '-l', text);
      tmux('send-keys', '-t', 't', 'Enter');
    },
    screen: () => tmux('capture-pane', '-p', '-J', '-t', 't', '-S', '-'),
    exited() {
      const [dead, status, signal] = tmux('display-message', '-p', '-t', 't', '#{pane_dead}|#{pane_dead_status}|#{pane_dead_signal}').trim().split('|');
      // tmux can mark the pane dead a moment before it has the exit status: not known yet.
      if (dead !== '1' || (status === '' && signal === '')) return null;
      // Killed by a signal: the shell's convention, 128 + signal number.
      return status !== '' ? Number(status) : 128 + Number(signal);
    },
    ended: () => tmux('display-message', '-p', '-t', 't', '#{pane_dead}').trim() === '1',
    kill() {
      spawnSync('tmux', ['-L', socket, 'kill-server']);
    },
  };
}
