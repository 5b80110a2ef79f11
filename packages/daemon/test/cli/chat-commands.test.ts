/**
 * The chat's own commands are read here, not sent to the model; and "first token N ms" counts from the
 * moment the request is sent, so a server that is slow to answer (prefill, placement) shows in it.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseChatLine } from '../../src/cli/commands/chat-commands.js';
import { streamReply } from '../../src/cli/commands/chat.js';

describe('chat lines', () => {
  it('commands are answered by the chat; questions, and //-escaped slashes, go to the model', () => {
    expect(['/help', '/?', ' /HELP ', '/reset', '/clear', '/exit', '/quit', '/frobnicate now', '', '  '].map((l) => parseChatLine(l))).toEqual([
      { kind: 'help' },
      { kind: 'help' },
      { kind: 'help' },
      { kind: 'reset' },
      { kind: 'reset' },
      { kind: 'exit' },
      { kind: 'exit' },
      { kind: 'unknown', command: '/frobnicate' },
      { kind: 'empty' },
      { kind: 'empty' },
    ]);
    expect(parseChatLine('  And God said ')).toEqual({ kind: 'ask', text: 'And God said' });
    expect(parseChatLine('//usr/bin is a path')).toEqual({ kind: 'ask', text: '/usr/bin is a path' });
  });
});

describe('time to first token', () => {
  const HEADERS_AFTER_MS = 400;
  let server: Server;
  let url: string;
  beforeAll(async () => {
    // Headers only after the "prefill", then the first token at once: the case a clock started at the
    // headers would report as a few milliseconds.
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () =>
        setTimeout(() => {
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'In' }, finish_reason: null }] })}\n\n`);
          res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: ' the' }, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 2 } })}\n\n`);
          res.end('data: [DONE]\n\n');
        }, HEADERS_AFTER_MS),
      );
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('counts from sending the request, not from the response headers', async () => {
    let text = '';
    const r = await streamReply({ url, maxTokens: '8', temperature: '0' }, 'm', [{ role: 'user', content: 'hi' }], (s) => (text += s));
    expect(text).toBe('In the');
    expect(r.tokens).toBe(2);
    expect(r.firstTokenMs).toBeGreaterThanOrEqual(HEADERS_AFTER_MS - 5);
  });
});

describe('a reasoning model in the chat', () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        for (const delta of [{ reasoning_content: 'The user' }, { reasoning_content: ' asks.' }, { content: 'Hello' }, { content: '!' }]) res.write(`data: ${JSON.stringify({ choices: [{ delta, finish_reason: null }] })}\n\n`);
        res.write(`data: ${JSON.stringify({ choices: [{ delta: {}, finish_reason: 'stop' }], usage: { prompt_tokens: 3, completion_tokens: 4 } })}\n\n`);
        res.end('data: [DONE]\n\n');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('shows the thoughts apart from the answer (a line after them) and keeps only the answer', async () => {
    let text = '';
    let thoughts = '';
    const r = await streamReply({ url, maxTokens: '8', temperature: '0' }, 'm', [{ role: 'user', content: 'hi' }], (s) => (text += s), (s) => (thoughts += s));
    expect(text).toBe('Hello!');
    expect(r.text).toBe('Hello!');
    expect(thoughts).toBe('The user asks.\n');
    expect(r.firstTokenMs).not.toBeNull();
  });
});
