/** The request log line: time to first token counts whatever the model writes first (text, reasoning, a call). */
import { describe, expect, it } from 'vitest';
import { logRequests, type RequestRecord } from '../src/request-log.js';
import type { ServeEvent, ServeRequest } from '../src/requests/request.js';

function logged(events: [number, ServeEvent][]): RequestRecord {
  let clock = 0;
  const lines: RequestRecord[] = [];
  const log = { info: (o: { request: RequestRecord }) => lines.push(o.request), warn: (o: { request: RequestRecord }) => lines.push(o.request) };
  const run = logRequests(
    async (_model, _req, emit) => {
      for (const [at, e] of events) {
        clock = at;
        emit(e);
      }
    },
    log as never,
    () => clock,
  );
  return run('m', { kind: 'chat' } as ServeRequest, () => {}, new AbortController().signal).then(() => lines[0]) as unknown as RequestRecord;
}

const done: ServeEvent = { type: 'done', finishReason: 'length', promptTokens: 5, completionTokens: 3, decodeTokensPerSecond: 10 };

describe('the request log line', () => {
  it('times the first token from the first reasoning, text or call, and none when nothing was written', async () => {
    expect((await logged([[1, { type: 'start', promptTokens: 5 }], [7, { type: 'reasoning', text: 'hm' }], [9, { type: 'text', text: 'a' }], [10, done]])).ttftMs).toBe(7);
    expect((await logged([[2, { type: 'start', promptTokens: 5 }], [4, { type: 'text', text: 'a' }], [10, done]])).ttftMs).toBe(4);
    expect((await logged([[3, { type: 'tool_call', index: 0, call: { id: 'c', name: 'f', arguments: '{}' } }], [10, done]])).ttftMs).toBe(3);
    expect((await logged([[2, { type: 'start', promptTokens: 5 }], [10, done]])).ttftMs).toBeNull();
  });
});
