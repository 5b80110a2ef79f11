/**
 * What a line typed into `orchard chat` means: a question for the model, or one of the chat's own
 * commands, answered here and never sent to the model. Pure: a line in, an action out.
 */

export type ChatLine =
  | { kind: 'ask'; text: string }
  | { kind: 'empty' }
  | { kind: 'exit' }
  | { kind: 'reset' }
  | { kind: 'help' }
  | { kind: 'unknown'; command: string };

/** The commands as /help lists them. */
export const CHAT_HELP = [
  'commands (answered here, not sent to the model):',
  '  /help, /?      this list',
  '  /reset, /clear start a new conversation (the model forgets the earlier turns)',
  '  /exit, /quit   leave (Ctrl-D too)',
  '  //text         send "/text" to the model as it is',
].join('\n');

const COMMANDS: Record<string, ChatLine['kind']> = {
  '/help': 'help',
  '/?': 'help',
  '/reset': 'reset',
  '/clear': 'reset',
  '/exit': 'exit',
  '/quit': 'exit',
};

export function parseChatLine(line: string): ChatLine {
  const text = line.trim();
  if (!text) return { kind: 'empty' };
  if (text.startsWith('//')) return { kind: 'ask', text: text.slice(1) };
  if (!text.startsWith('/')) return { kind: 'ask', text };
  const command = text.split(/\s+/, 1)[0]!.toLowerCase();
  const kind = COMMANDS[command];
  return kind ? ({ kind } as ChatLine) : { kind: 'unknown', command };
}
