/**
 * Chat with a model of the pod: streamed replies (POST /v1/chat/completions, stream), stop, tokens/s.
 * The conversation sent is fitted to the model's context (web/conversation.ts), with a note when old
 * turns are left out or an answer is cut short; an error leaves the conversation as it was.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, streamSse } from './api.js';
import { Conversation } from './conversation.js';
import { rate } from './format.js';
import type { InstanceView } from './types.js';

interface Message {
  role: 'user' | 'assistant';
  content: string;
  /** What a reasoning model thinks before its answer (shown, never sent back). */
  reasoning?: string;
  stats?: string;
  /** Said next to an answer: turns left out to fit the context, an answer cut short. */
  notes?: string[];
  error?: string;
}

const MAX_TOKENS = 256;

export function Chat({ models, instances }: { models: string[]; instances: InstanceView[] }) {
  const [model, setModel] = useState('');
  const [messages, setMessages] = useState<Message[]>([]);
  const [input, setInput] = useState('');
  const [running, setRunning] = useState<AbortController | null>(null);
  const [error, setError] = useState<string | null>(null);
  const log = useRef<HTMLDivElement>(null);
  // What is sent: the conversation, fitted to the model's context (oldest turns left out first).
  const conversation = useRef(new Conversation({ maxTokens: MAX_TOKENS }));
  const conversationModel = useRef('');

  useEffect(() => {
    if (model && models.includes(model)) return;
    // Prefer a model that is already loaded.
    const loaded = models.find((m) => instances.some((i) => i.model === m));
    if (loaded ?? models[0]) setModel(loaded ?? models[0]);
  }, [models, instances, model]);

  useEffect(() => {
    log.current?.scrollTo(0, log.current.scrollHeight);
  }, [messages]);

  const instance = instances.find((i) => i.model === model);
  const loaded = !!instance;
  const contextTokens = instance?.context ?? (conversationModel.current === model ? conversation.current.contextTokens : null);

  async function send(text: string) {
    const history: Message[] = [...messages.filter((m) => !m.error), { role: 'user', content: text }];
    setMessages([...history, { role: 'assistant', content: '' }]);
    setError(null);
    const abort = new AbortController();
    setRunning(abort);
    const started = performance.now();
    let first: number | null = null;
    let pieces = 0;
    let content = '';
    let reasoning = '';
    const update = (patch: Partial<Message>) => setMessages([...history, { role: 'assistant', content, ...(reasoning ? { reasoning } : {}), ...patch }]);
    if (conversationModel.current !== model) {
      conversation.current.modelChanged();
      conversationModel.current = model;
    }
    const result = await conversation.current.ask(text, async (sent) => {
      first = null;
      pieces = 0;
      content = '';
      reasoning = '';
      let finishReason: string | null = null;
      let usage: { prompt_tokens: number; completion_tokens: number } | null = null;
      await streamSse(
        '/v1/chat/completions',
        { method: 'POST', signal: abort.signal, body: JSON.stringify({ model, messages: sent, stream: true, stream_options: { include_usage: true }, max_tokens: MAX_TOKENS }) },
        (e) => {
          if (e.data === '[DONE]') return;
          const j = JSON.parse(e.data);
          if (j.error) throw new ApiError(j.error.code === 'queue_full' ? 429 : 503, j.error.message, j.error.code);
          // A reasoning model thinks first: its first token is the first thought.
          const thought = j.choices?.[0]?.delta?.reasoning_content;
          if (thought) {
            first ??= performance.now();
            pieces++;
            reasoning += thought;
            update({});
          }
          const piece = j.choices?.[0]?.delta?.content;
          if (piece) {
            first ??= performance.now();
            pieces++;
            content += piece;
            update({});
          }
          finishReason = j.choices?.[0]?.finish_reason ?? finishReason;
          if (j.usage) usage = j.usage;
        },
      );
      const u = usage as { prompt_tokens: number; completion_tokens: number } | null;
      return { text: content, finishReason, promptTokens: u?.prompt_tokens ?? null, completionTokens: u?.completion_tokens ?? null };
    });
    setRunning(null);
    const err = result.error as Error | undefined;
    if (err === undefined) {
      const end = performance.now();
      const tokens = result.reply?.completionTokens ?? pieces;
      const tps = first != null && tokens > 1 && end > first ? ((tokens - 1) * 1000) / (end - first) : null;
      update({ stats: `${tokens} tokens · ${rate(tps)} · first token after ${first != null ? Math.round(first - started) : '–'} ms`, notes: result.notes });
    } else if (err.name === 'AbortError') update({ stats: `stopped after ${pieces} piece${pieces === 1 ? '' : 's'} (left out of the conversation)` });
    else {
      const message = err instanceof ApiError || !(err instanceof TypeError) ? err.message : `the stream broke: ${err.message}`;
      update({ error: message });
      setError(message);
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
        {contextTokens ? (
          <span class="muted" data-testid="chat-context">
            context {contextTokens.toLocaleString('en-US')} tokens
          </span>
        ) : null}
        <button
          class="link"
          onClick={() => {
            setMessages([]);
            conversation.current.reset();
          }}
          disabled={!!running}
        >
          clear
        </button>
      </div>
      <div class="chat-log" ref={log} data-testid="chat-log">
        {messages.length === 0 && <p class="muted">Ask the pod something.</p>}
        {messages.map((m, k) => (
          <div key={k} class={`msg ${m.role}`} data-role={m.role}>
            {m.reasoning && (
              <div class="reasoning" data-testid="chat-reasoning">
                {m.reasoning}
              </div>
            )}
            {(m.content || !m.error) && <div class="content">{m.content || (m.role === 'assistant' && running ? '…' : '')}</div>}
            {m.error && <div class="error" data-testid="chat-error">{m.error}</div>}
            {m.stats && (
              <div class="stats" data-testid="chat-stats">
                {m.stats}
              </div>
            )}
            {m.notes?.map((n) => (
              <div key={n} class="note" data-testid="chat-note">
                {n}
              </div>
            ))}
          </div>
        ))}
      </div>
      {model && !loaded && (
        <p class="muted" data-testid="chat-hint">
          {model} is not loaded yet: your first message loads it on the pod (a few seconds for a small model).
        </p>
      )}
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
