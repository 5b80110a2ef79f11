/**
 * Server-sent events on a hijacked reply: the head is written once, events are `data:` lines, and
 * writes after the end are dropped (the client may have gone). Both the OpenAI streams and
 * `/api/events` write through this.
 */
import type { FastifyReply } from 'fastify';

export interface SseStream {
  readonly started: boolean;
  /** Writes the 200 head (once). */
  begin(): void;
  /** One `data:` event (JSON), or a named event with `event`. */
  send(data: unknown, event?: string): void;
  /** A comment line (keeps proxies from timing the stream out). */
  comment(text: string): void;
  end(last?: string): void;
  readonly ended: boolean;
}

export function sseStream(reply: FastifyReply, contentType = 'text/event-stream; charset=utf-8'): SseStream {
  reply.hijack();
  const res = reply.raw;
  let started = false;
  const write = (chunk: string) => {
    if (!res.writableEnded && !res.destroyed) res.write(chunk);
  };
  return {
    get started() {
      return started;
    },
    get ended() {
      return res.writableEnded || res.destroyed;
    },
    begin() {
      if (started) return;
      started = true;
      res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    },
    send(data, event) {
      this.begin();
      write(`${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`);
    },
    comment(text) {
      this.begin();
      write(`: ${text}\n\n`);
    },
    end(last) {
      if (res.writableEnded) return;
      if (last) write(last);
      res.end();
    },
  };
}
