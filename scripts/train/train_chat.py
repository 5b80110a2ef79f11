"""Teaches the Bible demo model to chat and call tools, stopping by wall-clock time.

Starts from the committed KJV weights (models/orchard-demo, F16) or a checkpoint, grows the vocabulary by
<|im_start|> and <|im_end|> and the context to --ctx-max (RoPE has no learned positions, so only the
training windows limit what the model has seen), then trains on a mix of synthetic conversations
(corpus_chat.py, rendered by the shipped chat template; loss weighted to what the assistant writes) and
Bible windows (so it still continues text). Keeps the checkpoint with the best chat validation loss.
Usage: nice -n 5 /usr/bin/python3 train_chat.py --minutes 55 --out out/chat
"""
import argparse
import json
import math
import os
import struct
import time

import torch
import torch.nn.functional as F

from corpus import raw_text, split
from corpus_chat import EOT, conversations
from model import Config, Llama

VOCAB = 259  # 256 bytes, <|endoftext|>, <|im_start|>, <|im_end|>


def read_safetensors(path: str) -> dict[str, torch.Tensor]:
    """F16/F32 safetensors without the safetensors package (Debian has none)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, h in header.items():
        if name == "__metadata__":
            continue
        dt = {"F16": torch.float16, "F32": torch.float32}[h["dtype"]]
        a, b = h["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[a:b]), dtype=dt).reshape(h["shape"]).float()
    return out


def grow_vocab(state: dict[str, torch.Tensor], vocab: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """New token rows: small random embeddings, and output rows copied from <|endoftext|> (also an end marker)."""
    emb, head = state["model.embed_tokens.weight"], state["lm_head.weight"]
    extra = vocab - emb.shape[0]
    if extra <= 0:
        return state
    state["model.embed_tokens.weight"] = torch.cat([emb, torch.randn(extra, emb.shape[1], generator=gen) * 0.02])
    state["lm_head.weight"] = torch.cat([head, head[EOT:EOT + 1].repeat(extra, 1)])
    return state


def stream(convs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    ids, weights, starts = [], [], []
    for c, m in convs:
        starts.append(len(ids))
        ids += c
        weights += m
    return torch.tensor(ids), torch.tensor(weights, dtype=torch.float32), torch.tensor(starts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=55)
    ap.add_argument("--out", default="out/chat")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=6)
    ap.add_argument("--window", type=int, default=1024, help="training window in tokens")
    ap.add_argument("--ctx-max", type=int, default=2048, help="max_position_embeddings written to the config")
    ap.add_argument("--bible-rows", type=int, default=1, help="rows per batch of Bible text (128-byte windows, tiled)")
    ap.add_argument("--bible-weight", type=float, default=0.25, help="loss weight of a Bible byte relative to an assistant token")
    ap.add_argument("--no-start-eval", dest="start_eval", action="store_false", help="skip scoring the initial weights")
    ap.add_argument("--valid-conversations", type=int, default=64)
    ap.add_argument("--prompt-weight", type=float, default=0.1, help="loss weight of non-assistant chat tokens")
    ap.add_argument("--conversations", type=int, default=12000)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--eval-every-s", type=float, default=240)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--init", default="../../models/orchard-demo/model.safetensors",
                    help="a .safetensors (the Bible model) or a train_chat.py checkpoint")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    log = open(os.path.join(args.out, "train.log"), "a", buffering=1)

    def say(msg: str) -> None:
        print(msg, flush=True)
        log.write(msg + "\n")

    cfg = Config(vocab_size=VOCAB, max_position_embeddings=args.ctx_max)
    model = Llama(cfg)
    prior_steps, prior_s = 0, 0.0
    if args.init.endswith(".safetensors"):
        model.load_state_dict(grow_vocab(read_safetensors(args.init), VOCAB, gen))
    else:
        init = torch.load(args.init)
        model.load_state_dict(init["state_dict"])
        prior_steps, prior_s = init["total_steps"], init["total_elapsed_s"]

    # A continued run draws other batches than the first one did (the corpus itself stays the same).
    gen = torch.Generator().manual_seed(args.seed + prior_steps)
    train_text, valid_text = split(raw_text())
    verses = [l for l in train_text.splitlines() if len(l) > 20 and len(l) < 200]
    bible = torch.tensor(list(train_text.encode("utf-8")))
    bible_valid = torch.tensor(list(valid_text.encode("utf-8")))
    t0 = time.time()
    c_ids, c_w, c_starts = stream(conversations(args.seed, args.conversations, verses))
    v_ids, v_w, v_starts = stream(conversations(args.seed + 1, args.valid_conversations, verses))
    c_w = torch.where(c_w > 0, 1.0, args.prompt_weight)
    say(f"params {sum(p.numel() for p in model.parameters())} config {json.dumps(cfg.to_dict())} args {vars(args)}")
    say(f"chat corpus {len(c_ids)} tokens in {len(c_starts)} conversations ({c_w.eq(1).sum().item()} assistant tokens), "
        f"built in {time.time() - t0:.0f}s; bible {len(bible)} bytes")

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    W = args.window

    def chat_batch(ids, w, starts, rows, g):
        pick = starts[torch.randint(0, len(starts), (rows,), generator=g)]
        pick = pick.clamp(max=len(ids) - W - 1)
        x = torch.stack([ids[i:i + W] for i in pick])
        y = torch.stack([ids[i + 1:i + W + 1] for i in pick])
        m = torch.stack([w[i + 1:i + W + 1] for i in pick])
        return x, y, m

    @torch.no_grad()
    def evaluate() -> tuple[float, float]:
        model.eval()
        # Assistant-token loss over the validation conversations, each from its start.
        tot, cnt = 0.0, 0.0
        for k in range(0, len(v_starts), 8):
            idx = v_starts[k:k + 8].clamp(max=len(v_ids) - W - 1)
            x = torch.stack([v_ids[i:i + W] for i in idx])
            y = torch.stack([v_ids[i + 1:i + W + 1] for i in idx])
            m = torch.stack([v_w[i + 1:i + W + 1] for i in idx])
            ce = F.cross_entropy(model(x).view(-1, VOCAB), y.reshape(-1), reduction="none")
            tot += (ce * m.reshape(-1)).sum().item()
            cnt += m.sum().item()
        chat = tot / cnt
        n = 128
        x = torch.stack([bible_valid[r * 128:(r + 1) * 128] for r in range(n)])
        y = torch.stack([bible_valid[r * 128 + 1:(r + 1) * 128 + 1] for r in range(n)])
        bl = F.cross_entropy(model(x).view(-1, VOCAB), y.reshape(-1)).item()
        model.train()
        return chat, bl

    if args.start_eval:
        chat0, bible0 = evaluate()
        say(f"start: chat_valid (assistant tokens) {chat0:.4f} bible_valid_subset {bible0:.4f}")
    budget = args.minutes * 60
    start = time.time()
    last_eval = start
    best = math.inf
    step = 0

    def save(chat: float, bl: float) -> None:
        torch.save({"config": cfg.to_dict(), "state_dict": model.state_dict(), "step": step,
                    "elapsed_s": time.time() - start, "chat_valid": chat, "bible_valid_subset": bl,
                    "total_steps": prior_steps + step, "total_elapsed_s": prior_s + time.time() - start, "args": vars(args)},
                   os.path.join(args.out, "best.pt"))

    while time.time() - start < budget:
        frac = (time.time() - start) / budget
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y, m = chat_batch(c_ids, c_w, c_starts, args.batch, gen)
        loss_sum = (F.cross_entropy(model(x).view(-1, VOCAB), y.reshape(-1), reduction="none") * m.reshape(-1)).sum()
        denom = m.sum()
        if args.bible_rows:
            # Bible rows as 128-byte windows (what the Bible model saw), W/128 of them per row.
            n = args.bible_rows * (W // 128)
            ix = torch.randint(0, len(bible) - 129, (n,), generator=gen)
            bx = torch.stack([bible[i:i + 128] for i in ix])
            by = torch.stack([bible[i + 1:i + 129] for i in ix])
            loss_sum = loss_sum + F.cross_entropy(model(bx).view(-1, VOCAB), by.reshape(-1), reduction="sum") * args.bible_weight
            denom = denom + by.numel() * args.bible_weight
        loss = loss_sum / denom
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 10 == 0:
            say(f"step {step} t {time.time() - start:.0f}s lr {lr:.2e} loss {loss.item():.4f}")
        if time.time() - last_eval >= args.eval_every_s:
            chat, bl = evaluate()
            last_eval = time.time()
            say(f"eval step {step} t {time.time() - start:.0f}s chat_valid {chat:.4f} bible_valid_subset {bl:.4f}")
            if chat < best:
                best = chat
                save(chat, bl)
    chat, bl = evaluate()
    say(f"final step {step} t {time.time() - start:.0f}s chat_valid {chat:.4f} bible_valid_subset {bl:.4f}")
    if chat < best:
        save(chat, bl)
    say(f"done; total wall {time.time() - start:.0f}s")


if __name__ == "__main__":
    main()
