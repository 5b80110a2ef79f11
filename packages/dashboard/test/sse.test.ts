import { describe, expect, it } from 'vitest';
import { SseParser } from '../web/sse.js';

describe('SseParser', () => {
  it('reassembles events split at any byte, with event names, multi-line data and comments', () => {
    const wire = ': keep-alive\n\nevent: cluster\ndata: {"a":1}\n\ndata: line1\ndata: line2\n\ndata:[DONE]\r\n\r\n';
    const want = [
      { event: 'cluster', data: '{"a":1}' },
      { event: 'message', data: 'line1\nline2' },
      { event: 'message', data: '[DONE]' },
    ];
    for (let cut = 0; cut <= wire.length; cut++) {
      const p = new SseParser();
      const got = [...p.push(wire.slice(0, cut)), ...p.push(wire.slice(cut))];
      expect(got, `cut at ${cut}`).toEqual(want);
    }
    const p = new SseParser();
    expect([...wire].flatMap((ch) => p.push(ch))).toEqual(want);
  });

  it('holds an event until its blank line arrives', () => {
    const p = new SseParser();
    expect(p.push('data: {"x":')).toEqual([]);
    expect(p.push('1}\n')).toEqual([]);
    expect(p.push('\n')).toEqual([{ event: 'message', data: '{"x":1}' }]);
  });
});
