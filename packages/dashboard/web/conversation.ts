/**
 * A chat conversation that keeps fitting the model's context: the terminal chat (`orchard chat`) and
 * the dashboard's chat both hold one. Neither side has the model's tokenizer, so what fits is learnt
 * from the daemon's own answers: the context size from a `context_length_exceeded` error or from an
 * answer the context cut short, and tokens per character from each answer's `prompt_tokens`.
 * The oldest turns are left out first; system messages always stay. Pure: no DOM, no Node.
 */

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** What one request answered (streamed or not). */
export interface ChatReply {
  text: string;
  finishReason: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
}

/** Sends `messages` and resolves with the answer; throws on any failure (the conversation survives it). */
export type SendChat = (messages: ChatMessage[]) => Promise<ChatReply>;

/** The outcome of one question, with the notes a person should see next to the answer. */
export interface AskResult {
  reply: ChatReply | null;
  /** Turns (question + answer) left out of this request, oldest first, counted since the start. */
  leftOut: number;
  notes: string[];
  /** Set when no answer came: the conversation is as it was before the question. */
  error?: unknown;
}

/** The daemon's 400 for a prompt that does not fit: "the prompt has N tokens; this model's context holds C". */
export function contextOverflow(message: string): { promptTokens: number; contextTokens: number } | null {
  const m = /prompt has (\d+) tokens?; this model's context holds (\d+)/.exec(message);
  return m ? { promptTokens: Number(m[1]), contextTokens: Number(m[2]) } : null;
}

/** Characters a chat template adds around each message, roughly ("User: ", newlines, role tokens). */
const PER_MESSAGE_CHARS = 12;

const charsOf = (messages: ChatMessage[]) => messages.reduce((n, m) => n + m.content.length + PER_MESSAGE_CHARS, 0);

export class Conversation {
  readonly #system: ChatMessage[];
  /** Completed turns: a question and its answer. */
  #turns: { user: ChatMessage; assistant: ChatMessage }[] = [];
  /** Turns before this index are no longer sent (the window only moves forward). */
  #start = 0;
  /** Tokens the model can hold (prompt + answer), once learnt. */
  contextTokens: number | null = null;
  /** Prompt tokens per character of message text, from the last answer. */
  #tokensPerChar: number | null = null;
  readonly #maxTokens: number;

  constructor(o: { system?: string; maxTokens: number }) {
    this.#system = o.system ? [{ role: 'system', content: o.system }] : [];
    this.#maxTokens = o.maxTokens;
  }

  /** Everything said so far, including turns no longer sent. */
  get history(): ChatMessage[] {
    return [...this.#system, ...this.#turns.flatMap((t) => [t.user, t.assistant])];
  }

  /** Turns left out of the requests so far. */
  get leftOut(): number {
    return this.#start;
  }

  reset(): void {
    this.#turns = [];
    this.#start = 0;
  }

  /** Another model answers from now on: what was learnt about the context no longer holds. */
  modelChanged(): void {
    this.contextTokens = null;
    this.#tokensPerChar = null;
  }

  #window(start: number, question: ChatMessage): ChatMessage[] {
    return [...this.#system, ...this.#turns.slice(start).flatMap((t) => [t.user, t.assistant]), question];
  }

  /** The first turn to send so that the prompt leaves room for an answer, by the current estimate. */
  #fit(question: ChatMessage): number {
    let start = this.#start;
    if (this.contextTokens === null || this.#tokensPerChar === null) return start;
    // Room for an answer: the requested length, but never more than half the context.
    const budget = this.contextTokens - Math.min(this.#maxTokens, Math.floor(this.contextTokens / 2));
    while (start < this.#turns.length && charsOf(this.#window(start, question)) * this.#tokensPerChar > budget) start++;
    return start;
  }

  async ask(text: string, send: SendChat): Promise<AskResult> {
    const question: ChatMessage = { role: 'user', content: text };
    const before = this.#start;
    let start = this.#fit(question);
    for (;;) {
      const messages = this.#window(start, question);
      let reply: ChatReply;
      try {
        reply = await send(messages);
      } catch (err) {
        const over = contextOverflow((err as Error)?.message ?? '');
        if (!over) return { reply: null, leftOut: this.#start, notes: [], error: err };
        this.contextTokens = over.contextTokens;
        this.#tokensPerChar = over.promptTokens / charsOf(messages);
        // Leave out at least one more turn than this attempt did, so every retry makes progress.
        const next = Math.max(start + 1, this.#fit(question));
        if (next > this.#turns.length) {
          const own = Math.ceil(charsOf([...this.#system, question]) * this.#tokensPerChar);
          const note = `your message is about ${own} tokens, too long for the model's context of ${over.contextTokens} tokens with room for an answer: say it in fewer words`;
          return { reply: null, leftOut: this.#start, notes: [], error: new Error(note) };
        }
        start = next;
        continue;
      }
      this.#start = start;
      this.#turns.push({ user: question, assistant: { role: 'assistant', content: reply.text } });
      if (reply.promptTokens !== null && reply.promptTokens > 0) this.#tokensPerChar = reply.promptTokens / charsOf(messages);
      const notes: string[] = [];
      if (start > before) {
        const n = start - before;
        const kept = this.#system.length ? '; the system message stays' : '';
        notes.push(`left out ${n} more old turn${n === 1 ? '' : 's'} to fit the model's context${this.contextTokens ? ` of ${this.contextTokens} tokens` : ''} (${start} of ${this.#turns.length - 1} now left out${kept})`);
      }
      if (reply.finishReason === 'length') notes.push(this.#lengthNote(reply));
      return { reply, leftOut: start, notes };
    }
  }

  /** Why an answer stopped at a length: the context was full, or it reached the answer limit. */
  #lengthNote(r: ChatReply): string {
    const used = (r.promptTokens ?? 0) + (r.completionTokens ?? 0);
    if (r.completionTokens !== null && r.completionTokens < this.#maxTokens && r.promptTokens !== null) {
      // The daemon cut it at the context's end: that is the context's size.
      this.contextTokens = used;
      return `the answer was cut off: the model's context of ${used} tokens is full (older turns will be left out next time)`;
    }
    if (this.contextTokens !== null && used >= this.contextTokens) return `the answer was cut off: the model's context of ${this.contextTokens} tokens is full`;
    return `the answer was cut off at the limit of ${this.#maxTokens} tokens per answer`;
  }
}
