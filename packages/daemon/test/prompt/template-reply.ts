/** The reply a family's template writes for one assistant turn, as its tests read it back. */
import { FAMILIES, type FamilyName } from '../../../engine/test/fixtures/chat-templates/families.js';

/**
 * What the rendering with the assistant's turn (`withTurn`, no generation prompt) adds to the prompt
 * (`prompt`), from a marker boundary (they can part inside one), end-of-turn tokens removed.
 * Command R's template repeats its closing instruction (with an example "Action:") after the whole
 * conversation and opens the turn with <|CHATBOT_TOKEN|>: its reply is that turn alone.
 */
export function templateReply(f: FamilyName, prompt: string, withTurn: string): string {
  let common = 0;
  while (common < prompt.length && prompt[common] === withTurn[common]) common++;
  if (common < prompt.length) common = withTurn.lastIndexOf('>', common - 1) + 1;
  let reply = withTurn.slice(common);
  const fam = FAMILIES[f] as { eos: string; moreEos?: string[] };
  for (const e of [fam.eos, ...(fam.moreEos ?? [])]) reply = reply.split(e).join('');
  if (f === 'commandR') {
    const rest = reply.slice(reply.indexOf('<|CHATBOT_TOKEN|>') + '<|CHATBOT_TOKEN|>'.length);
    reply = rest.slice(0, rest.indexOf('<|START_OF_TURN_TOKEN|>'));
  }
  return reply;
}
