import { describe, expect, it } from 'vitest';
import { contextOverflow, Conversation, type ChatMessage, type ChatReply } from '../web/conversation.js';

/**
 * A daemon in miniature: one token per character of a plain-text template (like the bundled byte-level
 * model), a context of `context` tokens, answers of `answer` characters cut where the context ends.
 */
function fakeDaemon(context: number, answer = 30) {
  const sent: ChatMessage[][] = [];
  const send = async (messages: ChatMessage[]): Promise<ChatReply> => {
    sent.push(messages);
    const prompt = messages.map((m) => `${m.role}: ${m.content}\n`).join('').length;
    if (prompt >= context) throw new Error(`POST /v1/chat/completions: 400 the prompt has ${prompt} tokens; this model's context holds ${context}`);
    const n = Math.min(answer, context - prompt);
    return { text: 'x'.repeat(n), finishReason: n < answer ? 'length' : 'stop', promptTokens: prompt, completionTokens: n };
  };
  return { send, sent };
}

describe('a conversation that keeps fitting the context', () => {
  it('reads the daemon wording of an overflow', () => {
    expect(contextOverflow("400 the prompt has 179 tokens; this model's context holds 128")).toEqual({ promptTokens: 179, contextTokens: 128 });
    expect(contextOverflow('503 no instance became ready')).toBeNull();
  });

  it('leaves out the oldest turns, keeps the system message, and says so', async () => {
    const d = fakeDaemon(128);
    const c = new Conversation({ system: 'be brief', maxTokens: 40 });
    const notes: string[] = [];
    for (let i = 0; i < 10; i++) {
      const r = await c.ask(`question number ${i}`, d.send);
      expect(r.error).toBeUndefined();
      expect(r.reply?.text.length).toBeGreaterThan(0);
      notes.push(...r.notes);
    }
    expect(c.leftOut).toBeGreaterThan(0);
    expect(c.history).toHaveLength(1 + 2 * 10);
    for (const messages of d.sent) {
      expect(messages[0]).toEqual({ role: 'system', content: 'be brief' });
      expect(messages.at(-1)?.role).toBe('user');
    }
    // Once learnt, the window is fitted before sending: later requests need no retry.
    const last = d.sent.slice(-3);
    expect(new Set(last.map((m) => m.at(-1)!.content)).size).toBe(3);
    expect(notes.some((n) => /left out \d+ more old turns? to fit the model's context of 128 tokens \(\d+ of \d+ now left out; the system message stays\)/.test(n))).toBe(true);
  });

  it('learns the context from an answer the context cut short and says why it stopped', async () => {
    const d = fakeDaemon(64, 200);
    const c = new Conversation({ maxTokens: 256 });
    const r = await c.ask('hello there', d.send);
    expect(r.reply?.finishReason).toBe('length');
    expect(r.notes.join()).toMatch(/cut off: the model's context of 64 tokens is full/);
    expect(c.contextTokens).toBe(64);
  });

  it('tells an answer stopped by max tokens from one stopped by the context', async () => {
    const d = fakeDaemon(4096, 100);
    const c = new Conversation({ maxTokens: 100 });
    const r = await c.ask('hi', async (m) => ({ ...(await d.send(m)), finishReason: 'length' }));
    expect(r.notes.join()).toMatch(/cut off at the limit of 100 tokens per answer/);
  });

  it('keeps the conversation after an error and after a message too long for any window', async () => {
    const d = fakeDaemon(128);
    const c = new Conversation({ maxTokens: 40 });
    await c.ask('first', d.send);
    const failed = await c.ask('second', async () => {
      throw new Error('cannot reach the daemon');
    });
    expect((failed.error as Error).message).toMatch(/cannot reach/);
    expect(c.history).toHaveLength(2);
    const huge = await c.ask('y'.repeat(500), d.send);
    expect((huge.error as Error).message).toMatch(/your message is about \d+ tokens, too long for the model's context of 128 tokens/);
    expect(c.history).toHaveLength(2);
    const after = await c.ask('third', d.send);
    expect(after.reply).not.toBeNull();
    expect(c.history).toHaveLength(4);
  });
});
