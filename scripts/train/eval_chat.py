"""Measures how often the chat model writes a well-formed tool call, and answers after the result.

On held-out synthetic conversations (a generator seed never trained on): the prompt up to the user's
request, rendered by the shipped template with the generation prompt; the reply decoded greedily and,
separately, sampled at temperature 1 (one seed each). Counts: a well-formed Hermes call (a JSON object
with "name" and object "arguments" between <tool_call> lines), the right tool, the exact arguments; then,
given the tool's result, an answer in text (no call) that ends its turn.
Usage: /usr/bin/python3 eval_chat.py --ckpt out/chat/best.pt --n 40
"""
import argparse
import json
import re

import torch

from corpus import raw_text, split
from corpus_chat import EOT, IM_END, Gen, encode, environment, template_text
from export import decode
from model import Config, Llama

CALL = re.compile(r"^(?:<think>\n.*?\n</think>\n\n)?<tool_call>\n(.*?)\n</tool_call>$", re.S)


@torch.no_grad()
def reply(model: Llama, prompt: str, temperature: float, seed: int, n: int = 120) -> tuple[str, bool]:
    gen = torch.Generator().manual_seed(seed)
    ids = encode(prompt)
    start = len(ids)
    for _ in range(n):
        logits = model(torch.tensor([ids[-model.cfg.max_position_embeddings:]]))[0, -1]
        nxt = int(logits.argmax()) if temperature == 0 else int(torch.multinomial((logits / temperature).softmax(-1), 1, generator=gen))
        if nxt in (IM_END, EOT):
            return decode(ids[start:]), True
        ids.append(nxt)
    return decode(ids[start:]), False


def parse_call(text: str):
    m = CALL.match(text.strip())
    if not m:
        return None
    try:
        o = json.loads(m.group(1))
    except json.JSONDecodeError:
        return None
    return o if isinstance(o, dict) and isinstance(o.get("name"), str) and isinstance(o.get("arguments"), dict) else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="out/chat/best.pt")
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=777001)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ck = torch.load(args.ckpt)
    model = Llama(Config(**ck["config"]))
    model.load_state_dict(ck["state_dict"])
    with torch.no_grad():  # as shipped: F16
        for p in model.parameters():
            p.copy_(p.to(torch.float16).to(torch.float32))
    model.eval()
    train_text, _ = split(raw_text())
    verses = [l for l in train_text.splitlines() if 20 < len(l) < 200]
    gen = Gen(args.seed, verses)
    tmpl = environment().from_string(template_text())
    counts = {k: 0 for k in ["greedy_wellformed", "greedy_name", "greedy_args", "sampled_wellformed", "sampled_name", "answer_text", "answer_uses_result"]}
    for i in range(args.n):
        conv = gen.tool_conversation()
        msgs = conv["messages"]
        at = next(k for k, m in enumerate(msgs) if m.get("tool_calls"))
        want = msgs[at]["tool_calls"][0]["function"]
        prompt = tmpl.render(messages=msgs[:at], tools=conv["tools"], add_generation_prompt=True)
        for mode, temp in (("greedy", 0.0), ("sampled", 1.0)):
            text, ended = reply(model, prompt, temp, i)
            call = parse_call(text) if ended else None
            if call:
                counts[f"{mode}_wellformed"] += 1
                counts[f"{mode}_name"] += call["name"] == want["name"]
                if mode == "greedy":
                    counts["greedy_args"] += call["arguments"] == want["arguments"]
            if mode == "greedy" and i < 3:
                print(f"--- {msgs[at - 1]['content']!r}\n{text!r}")
        answer_prompt = tmpl.render(messages=msgs[:at + 2], tools=conv["tools"], add_generation_prompt=True)
        text, ended = reply(model, answer_prompt, 0.0, i)
        if ended and "<tool_call>" not in text and text.strip():
            counts["answer_text"] += 1
            expected = msgs[at + 2]["content"]
            result = msgs[at + 1]["content"]
            words = [w for w in re.findall(r"[A-Za-z0-9.:-]+", result) if len(w) > 2 and w not in ("city", "weather", "temperature")]
            counts["answer_uses_result"] += any(w in text for w in words) if words else text == expected
        if i < 3:
            print(f"answer: {text!r}")
    print(json.dumps({"n": args.n, **counts, "step": ck.get("total_steps", ck["step"])}))


if __name__ == "__main__":
    main()
