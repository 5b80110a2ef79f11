"""
An independent reference for the engine's forward pass, written from Hugging Face transformers'
modeling_llama / modeling_qwen2 / modeling_qwen3 semantics in PyTorch (float64, no KV cache, the whole
sequence at once): rotate_half RoPE (with Llama 3 frequency scaling), repeat_kv for GQA, q/k/v bias,
per-head q/k RMSNorm, tied embeddings. Reads the HF model directory directly (safetensors by hand).

usage: torch_reference.py MODEL_DIR  < {"ids": [...]}   →  {"logits": [[vocab floats] per position]}
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        a, b = e["data_offsets"]
        raw = data[a:b]
        if e["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype="<f4")
        elif e["dtype"] == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif e["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(e["dtype"])
        out[name] = torch.from_numpy(arr.astype(np.float64).reshape(e["shape"]))
    return out


def load_weights(d):
    index = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    w = {}
    for f in files:
        w.update(load_safetensors(os.path.join(d, f)))
    return w


def inv_freq(cfg, head_dim):
    base = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    rs = cfg.get("rope_scaling")
    if rs and rs.get("rope_type", rs.get("type")) == "llama3":
        factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
        old = rs["original_max_position_embeddings"]
        low_wl, high_wl = old / low, old / high
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wl, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
        inv = torch.where(medium, smoothed, scaled)
    return inv


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward(d, ids):
    cfg = json.load(open(os.path.join(d, "config.json")))
    w = load_weights(d)
    arch = cfg["architectures"][0]
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = cfg["hidden_size"]
    hd = cfg.get("head_dim") or D // H
    eps = cfg["rms_norm_eps"]
    T = len(ids)
    pos = torch.arange(T, dtype=torch.float64)
    freqs = torch.outer(pos, inv_freq(cfg, hd))
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    window = cfg.get("sliding_window") if arch == "MistralForCausalLM" else None
    if window:
        # Mistral attends to key positions k with q - window < k <= q.
        mask = mask + torch.full((T, T), float("-inf"), dtype=torch.float64).tril(-window)
    bias = arch == "Qwen2ForCausalLM" or cfg.get("attention_bias", False)
    o_bias = arch != "Qwen2ForCausalLM" and cfg.get("attention_bias", False)

    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = h @ w[p + "self_attn.q_proj.weight"].T
        k = h @ w[p + "self_attn.k_proj.weight"].T
        v = h @ w[p + "self_attn.v_proj.weight"].T
        if bias:
            q = q + w[p + "self_attn.q_proj.bias"]
            k = k + w[p + "self_attn.k_proj.bias"]
            v = v + w[p + "self_attn.v_proj.bias"]
        q = q.view(T, H, hd).transpose(0, 1)
        k = k.view(T, KV, hd).transpose(0, 1)
        v = v.view(T, KV, hd).transpose(0, 1)
        if arch == "Qwen3ForCausalLM":
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=0)
        v = v.repeat_interleave(H // KV, dim=0)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + mask, dim=-1) @ v
        o = att.transpose(0, 1).reshape(T, H * hd) @ w[p + "self_attn.o_proj.weight"].T
        if o_bias:
            o = o + w[p + "self_attn.o_proj.bias"]
        x = x + o
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = h @ w[p + "mlp.gate_proj.weight"].T
        u = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    return x @ head.T


if __name__ == "__main__":
    req = json.load(sys.stdin)
    logits = forward(sys.argv[1], req["ids"])
    json.dump({"logits": logits.tolist()}, sys.stdout)
