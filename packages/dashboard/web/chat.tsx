/** Chat with a model of the pod: streamed replies (POST /v1/chat/completions, stream), stop, tokens/s. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, streamSse } from './api.js';
import { rate } from './format.js';
import type { InstanceView } from './types.js';

interface Message {
  role: 'user' | 'assistant';
  content: string;
  stats?: string;
  error?: string;
}

export function Chat({ models, instances }: { models: string[]; instances: InstanceView[] }) {
  const [model, setModel] = useState('');
  const [messages, setMessages] = useState<Message[]>([]);
  const [input, setInput] = useState('');
  const [running, setRunning] = useState<AbortController | null>(null);
  const [error, setError] = useState<string | null>(null);
  const log = useRef<HTMLDivElement>(null);

  useEffect(() => {
    if (model && models.includes(model)) return;
    // Prefer a model that is already loaded.
    const loaded = models.find((m) => instances.some((i) => i.model === m));
    if (loaded ?? models[0]) setModel(loaded ?? models[0]);
  }, [models, instances, model]);

  useEffect(() => {
    log.current?.scrollTo(0, log.current.scrollHeight);
  }, [messages]);

  async function send(text: string) {
    const history: Message[] = [...messages.filter((m) => !m.error), { role: 'user', content: text }];
    setMessages([...history, { role: 'assistant', content: '' }]);
    setError(null);
    const abort = new AbortController();
    setRunning(abort);
    const started = performance.now();
    let first: number | null = null;
    let pieces = 0;
    let completionTokens: number | null = null;
    let content = '';
    const update = (patch: Partial<Message>) => setMessages([...history, { role: 'assistant', content, ...patch }]);
    try {
      await streamSse(
        '/v1/chat/completions',
        {
          method: 'POST',
          signal: abort.signal,
          body: JSON.stringify({ model, messages: history.map(({ role, content }) => ({ role, content })), stream: true, stream_options: { include_usage: true }, max_tokens: 256 }),
        },
        (e) => {
          if (e.data === '[DONE]') return;
          const j = JSON.parse(e.data);
          if (j.error) throw new ApiError(j.error.code === 'queue_full' ? 429 : 503, j.error.message, j.error.code);
          const piece = j.choices?.[0]?.delta?.content;
          if (piece) {
            first ??= performance.now();
            pieces++;
            content += piece;
            update({});
          }
          if (j.usage) completionTokens = j.usage.completion_tokens;
        },
      );
      const end = performance.now();
      const tokens = completionTokens ?? pieces;
      const tps = first != null && tokens > 1 && end > first ? ((tokens - 1) * 1000) / (end - first) : null;
      update({ stats: `${tokens} tokens · ${rate(tps)} · first token after ${first != null ? Math.round(first - started) : '–'} ms` });
    } catch (err) {
      if ((err as Error).name === 'AbortError') update({ stats: `stopped after ${pieces} piece${pieces === 1 ? '' : 's'}` });
      else {
        const message = err instanceof ApiError ? err.message : `the stream broke: ${(err as Error).message}`;
        update({ error: message });
        setError(message);
      }
    } finally {
      setRunning(null);
    }
  }

  return (
    <div class="chat">
      <div class="chat-bar">
        <select name="chat-model" value={model} onChange={(e) => setModel((e.target as HTMLSelectElement).value)}>
          {models.length === 0 && <option value="">no models</option>}
          {models.map((m) => (
            <option key={m}>{m}</option>
          ))}
        </select>
        <button class="link" onClick={() => setMessages([])} disabled={!!running}>
          clear
        </button>
      </div>
      <div class="chat-log" ref={log} data-testid="chat-log">
        {messages.length === 0 && <p class="muted">Ask the pod something.</p>}
        {messages.map((m, k) => (
          <div key={k} class={`msg ${m.role}`} data-role={m.role}>
            {(m.content || !m.error) && <div class="content">{m.content || (m.role === 'assistant' && running ? '…' : '')}</div>}
            {m.error && <div class="error" data-testid="chat-error">{m.error}</div>}
            {m.stats && (
              <div class="stats" data-testid="chat-stats">
                {m.stats}
              </div>
            )}
          </div>
        ))}
      </div>
      <form
        class="chat-input"
        onSubmit={(e) => {
          e.preventDefault();
          const text = input.trim();
          if (!text || running || !model) return;
          setInput('');
          void send(text);
        }}
      >
        <input name="prompt" placeholder={model ? `Message ${model}` : 'load a model first'} value={input} onInput={(e) => setInput((e.target as HTMLInputElement).value)} />
        {running ? (
          <button key="stop" type="button" class="danger" disabled={false} onClick={() => running.abort()}>
            Stop
          </button>
        ) : (
          <button key="send" type="submit" disabled={!model || !input.trim()}>
            Send
          </button>
        )}
      </form>
      {error && !messages.some((m) => m.error) && <p class="error">{error}</p>}
    </div>
  );
}
