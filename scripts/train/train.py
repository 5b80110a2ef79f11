"""Trains the Orchard demo model on the KJV Bible, stopping by wall-clock time.

Keeps the checkpoint with the best validation loss (nats/byte == nats/token: tokens are bytes).
Usage: nice -n 5 /usr/bin/python3 train.py --minutes 35 --out out
"""
import argparse
import json
import math
import os
import time

import torch
import torch.nn.functional as F

from corpus import raw_text, split
from model import Config, Llama


def load_bytes(text: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(text.encode("utf-8")), dtype=torch.uint8).long()


@torch.no_grad()
def evaluate(model, data: torch.Tensor, ctx: int, max_windows: int | None) -> float:
    """Mean next-byte loss over non-overlapping windows of `ctx` bytes (whole set when max_windows is None)."""
    model.eval()
    n = (len(data) - 1) // ctx
    if max_windows is not None:
        n = min(n, max_windows)
    total, count = 0.0, 0
    for s in range(0, n, 64):
        rows = range(s, min(n, s + 64))
        x = torch.stack([data[r * ctx:(r + 1) * ctx] for r in rows])
        y = torch.stack([data[r * ctx + 1:(r + 1) * ctx + 1] for r in rows])
        loss = F.cross_entropy(model(x).view(-1, model.cfg.vocab_size), y.reshape(-1), reduction="sum")
        total += loss.item()
        count += y.numel()
    model.train()
    return total / count


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=35)
    ap.add_argument("--out", default="out")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--eval-every-s", type=float, default=90)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--init", default=None, help="continue from this checkpoint's weights (fresh optimizer and schedule)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    train_text, valid_text = split(raw_text())
    train, valid = load_bytes(train_text), load_bytes(valid_text)
    cfg = Config()
    ctx = cfg.max_position_embeddings
    model = Llama(cfg)
    prior_steps, prior_s = 0, 0.0
    if args.init:
        init = torch.load(args.init)
        model.load_state_dict(init["state_dict"])
        prior_steps, prior_s = init.get("total_steps", init["step"]), init.get("total_elapsed_s", init["elapsed_s"])
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    log = open(os.path.join(args.out, "train.log"), "a", buffering=1)

    def say(msg: str) -> None:
        print(msg, flush=True)
        log.write(msg + "\n")

    say(f"params {n_params} config {json.dumps(cfg.to_dict())} args {vars(args)}")
    say(f"train {len(train)} bytes, valid {len(valid)} bytes; continuing from {args.init}: {prior_steps} steps, {prior_s:.0f}s" if args.init
        else f"train {len(train)} bytes, valid {len(valid)} bytes")
    budget = args.minutes * 60
    start = time.time()
    last_eval = start
    best = math.inf
    step = 0
    gen = torch.Generator().manual_seed(args.seed)
    while True:
        elapsed = time.time() - start
        if elapsed >= budget:
            break
        # Time-based schedule: linear warm-up, then cosine to 10% of peak at the end of the budget.
        frac = elapsed / budget
        lr = args.lr * min(1.0, (step + 1) / args.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        ix = torch.randint(0, len(train) - ctx - 1, (args.batch,), generator=gen)
        x = torch.stack([train[i:i + ctx] for i in ix])
        y = torch.stack([train[i + 1:i + ctx + 1] for i in ix])
        loss = F.cross_entropy(model(x).view(-1, cfg.vocab_size), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 50 == 0:
            say(f"step {step} t {elapsed:.0f}s lr {lr:.2e} train_loss {loss.item():.4f}")
        if time.time() - last_eval >= args.eval_every_s:
            last_eval = time.time()
            vl = evaluate(model, valid, ctx, 256)
            say(f"eval step {step} t {elapsed:.0f}s valid_loss_subset {vl:.4f}")
            if vl < best:
                best = vl
                torch.save({"config": cfg.to_dict(), "state_dict": model.state_dict(), "step": step,
                            "elapsed_s": time.time() - start, "valid_loss_subset": vl,
                            "total_steps": prior_steps + step, "total_elapsed_s": prior_s + time.time() - start}, os.path.join(args.out, "best.pt"))
    vl = evaluate(model, valid, ctx, 256)
    say(f"final step {step} t {time.time() - start:.0f}s valid_loss_subset {vl:.4f}")
    if vl < best:
        best = vl
        torch.save({"config": cfg.to_dict(), "state_dict": model.state_dict(), "step": step,
                    "elapsed_s": time.time() - start, "valid_loss_subset": vl,
                            "total_steps": prior_steps + step, "total_elapsed_s": prior_s + time.time() - start}, os.path.join(args.out, "best.pt"))
    ck = torch.load(os.path.join(args.out, "best.pt"))
    model.load_state_dict(ck["state_dict"])
    full = evaluate(model, valid, ctx, None)
    ck["valid_loss"] = full
    ck["train_wall_s"] = time.time() - start
    torch.save(ck, os.path.join(args.out, "best.pt"))
    say(f"best checkpoint step {ck['step']} full valid_loss {full:.4f} nats/byte; total wall {time.time() - start:.0f}s")


if __name__ == "__main__":
    main()
