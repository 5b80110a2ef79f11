"""Exports the best training checkpoint as a Hugging Face model directory (models/orchard-demo).

Writes config.json (LlamaForCausalLM), model.safetensors (F16; the format is written here directly:
u64 header length + JSON header + raw tensor bytes, since Debian has no `safetensors` package),
tokenizer.json / tokenizer_config.json (byte-level: token id == byte value, then `<|endoftext|>` = 256,
`<|im_start|>` = 257, `<|im_end|>` = 258, identical to @orchard/engine's buildByteLevelTokenizer({specialTokens:
[those three], eosToken: '<|im_end|>', chatTemplate: <chat_template.jinja>})), generation_config.json and README.md
(model card with the measured numbers).

Usage: /usr/bin/python3 export.py --ckpt out/best.pt --out ../../models/orchard-demo
"""
import argparse
import json
import os
import struct

import torch
import torch.nn.functional as F

from corpus import raw_text, split
from corpus_chat import IM_END as IM_END_ID, SPECIAL, encode, environment, template_text
from model import Config, Llama
from train import evaluate, load_bytes

EOT = "<|endoftext|>"
IM_END = "<|im_end|>"
# The Bible is scored on windows of the length it was trained on (the chat phase uses longer ones).
BIBLE_CTX = 128


def byte_to_unicode() -> list[str]:
    """GPT-2's reversible byte → printable unicode mapping (bytes_to_unicode)."""
    bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = [""] * 256
    for b, c in zip(bs, cs):
        table[b] = chr(c)
    return table


def tokenizer_files(max_len: int, specials: list[str], chat_template: str) -> tuple[dict, dict]:
    vocab = {c: b for b, c in enumerate(byte_to_unicode())}
    added = []
    for i, content in enumerate(specials):
        vocab[content] = 256 + i
        added.append({"id": 256 + i, "content": content, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True})
    byte_level = {"add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", **byte_level},
        "post_processor": {"type": "ByteLevel", **byte_level, "trim_offsets": False},
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": False,
        "add_eos_token": False,
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": IM_END,
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "model_max_length": max_len,
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added},
        "chat_template": chat_template,
    }
    return tokenizer, config


def write_safetensors(path: str, tensors: dict[str, torch.Tensor]) -> None:
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        t = t.detach().to(torch.float16).contiguous()
        data = t.numpy().tobytes()  # little-endian on every machine we run
        header[name] = {"dtype": "F16", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    js = json.dumps(header, separators=(",", ":"))
    js += " " * ((8 - len(js.encode()) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js.encode())))
        f.write(js.encode())
        for b in blobs:
            f.write(b)


def decode(ids: list[int]) -> str:
    names = {v: k for k, v in SPECIAL.items()}
    out, run = [], []
    for i in ids:
        if i < 256:
            run.append(i)
            continue
        out.append(bytes(run).decode("utf-8", errors="replace"))
        run = []
        out.append(names[i])
    out.append(bytes(run).decode("utf-8", errors="replace"))
    return "".join(out)


@torch.no_grad()
def sample(model: Llama, prompt: str, n: int, temperature: float, top_k: int, seed: int, stop: tuple[int, ...] = ()) -> str:
    """Temperature 0 is greedy; otherwise top-k sampling with a fixed seed. Returns only the new text."""
    gen = torch.Generator().manual_seed(seed)
    ids = encode(prompt)
    start = len(ids)
    for _ in range(n):
        x = torch.tensor([ids[-model.cfg.max_position_embeddings:]])
        logits = model(x)[0, -1]
        if temperature == 0:
            ids.append(int(logits.argmax()))
        else:
            top = torch.topk(logits / temperature, top_k)
            pick = torch.multinomial(top.values.softmax(-1), 1, generator=gen)
            ids.append(int(top.indices[pick]))
        if ids[-1] in stop:
            break
    return decode(ids[start:])


CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather for a city.",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CHAT_EXAMPLE = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "What is the weather in Oslo?"}]
CHAT_ROUND = [{"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": '{"city": "Oslo", "weather": "snowing", "temperature": -3}'}]


def write_json(path: str, value) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default="out/best.pt")
    ap.add_argument("--out", default="../../models/orchard-demo")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ck = torch.load(args.ckpt)
    cfg = Config(**ck["config"])
    model = Llama(cfg)
    model.load_state_dict(ck["state_dict"])
    # Report the loss of the weights as shipped: rounded to F16, computed in F32.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.float16).to(torch.float32))
    model.eval()
    _, valid_text = split(raw_text())
    valid_loss = evaluate(model, load_bytes(valid_text), BIBLE_CTX, None)
    n_params = sum(p.numel() for p in model.parameters())
    os.makedirs(args.out, exist_ok=True)

    state = {k: v for k, v in model.state_dict().items() if not (cfg.tie_word_embeddings and k == "lm_head.weight")}
    write_safetensors(os.path.join(args.out, "model.safetensors"), state)
    write_json(os.path.join(args.out, "config.json"), {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": cfg.hidden_size // cfg.num_attention_heads,
        "hidden_act": "silu",
        "max_position_embeddings": cfg.max_position_embeddings,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "vocab_size": cfg.vocab_size,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "bos_token_id": 256,
        "eos_token_id": [256, 258],
        "torch_dtype": "float16",
    })
    tokenizer, tokenizer_config = tokenizer_files(cfg.max_position_embeddings, list(SPECIAL), template_text())
    write_json(os.path.join(args.out, "tokenizer.json"), tokenizer)
    write_json(os.path.join(args.out, "tokenizer_config.json"), tokenizer_config)
    write_json(os.path.join(args.out, "generation_config.json"), {
        "bos_token_id": 256,
        "eos_token_id": [256, 258],
        "do_sample": True,
        "temperature": 0.7,
        "top_k": 40,
    })
    sample_prompt = "And God said,"
    samples = [sample(model, sample_prompt, 96, 0.7, 40, seed) for seed in (1, 2)]
    greedy = sample(model, sample_prompt, 96, 0.0, 1, 0)
    chat_prompt = environment().from_string(template_text()).render(messages=CHAT_EXAMPLE, tools=CHAT_TOOLS, add_generation_prompt=True)
    chat_call = sample(model, chat_prompt, 120, 0.0, 1, 0, (IM_END_ID, 256))
    answer_prompt = environment().from_string(template_text()).render(messages=CHAT_EXAMPLE + CHAT_ROUND, tools=CHAT_TOOLS, add_generation_prompt=True)
    chat_answer = sample(model, answer_prompt, 120, 0.0, 1, 0, (IM_END_ID, 256))
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "README.card.md"), encoding="utf-8") as f:
        card = f.read()
    card = card.format(
        params=f"{n_params:,}",
        params_m=f"{n_params / 1e6:.2f}M",
        hidden=cfg.hidden_size,
        layers=cfg.num_hidden_layers,
        heads=cfg.num_attention_heads,
        kv_heads=cfg.num_key_value_heads,
        ffn=cfg.intermediate_size,
        ctx=cfg.max_position_embeddings,
        chat_steps=ck.get("total_steps", ck["step"]),
        chat_minutes=f"{ck.get('total_elapsed_s', ck['elapsed_s']) / 60:.1f}",
        chat_batch=ck.get("args", {}).get("batch", 6),
        chat_window=ck.get("args", {}).get("window", 1024),
        chat_valid=f"{ck['chat_valid']:.3f}",
        valid_loss=f"{valid_loss:.4f}",
        bits_per_byte=f"{valid_loss / 0.6931471805599453:.3f}",
        sample_prompt=sample_prompt,
        samples="\n".join("    " + s.replace("\n", "\n    ") + "\n" for s in samples),
        greedy=greedy.replace("\n", "\n    "),
        chat_example="    " + json.dumps(CHAT_EXAMPLE[-1]["content"]),
        chat_call="    " + chat_call.replace("\n", "\n    "),
        chat_result="    " + CHAT_ROUND[-1]["content"],
        chat_answer="    " + chat_answer.replace("\n", "\n    "),
        size_kb=f"{os.path.getsize(os.path.join(args.out, 'model.safetensors')) / 1024:.0f}",
    )
    with open(os.path.join(args.out, "README.md"), "w", encoding="utf-8") as f:
        f.write(card)
    print(f"exported {n_params} params, step {ck.get('total_steps', ck['step'])}, {ck.get('total_elapsed_s', ck['elapsed_s']) / 60:.1f} min, F16 valid loss {valid_loss:.4f} nats/byte")
    print("\n".join(samples + [greedy, chat_call, chat_answer]))


if __name__ == "__main__":
    main()
