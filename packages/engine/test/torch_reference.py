"""
An independent reference for the engine's forward pass, written from Hugging Face transformers'
modeling_llama / modeling_qwen2 / modeling_qwen3 / modeling_qwen3_moe / modeling_mixtral /
modeling_deepseek_v3 / modeling_gpt_oss semantics in PyTorch (float64, no KV cache, the whole sequence at once):
rotate_half RoPE (with Llama 3 frequency scaling), repeat_kv for GQA, q/k/v bias, per-head q/k RMSNorm,
tied embeddings; sparse MoE blocks (routing in float32 with torch.topk, as the HF code does: softmax
top-k, DeepSeek's sigmoid + correction bias + group-limited top-k + routed scaling + shared experts);
DeepSeek's multi-head latent attention with yarn RoPE (interleaved) and its mscale on the softmax scale;
gpt-oss's attention sinks, alternating sliding/full layers, yarn attention factor, biased router with
softmax over the top-k logits and merged experts with the clamped SwiGLU (its inference path: every
expert computed, weighted by zero for those not chosen).
Reads the HF model directory directly (safetensors by hand).

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


def get_mscale(scale, mscale=1):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn_inv_freq(cfg, dim):
    """HF _compute_yarn_parameters: (inv_freq, attention_factor)."""
    base = cfg.get("rope_theta", 10000.0)
    rs = cfg["rope_scaling"]
    factor = rs["factor"]
    orig = rs.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
    af = rs.get("attention_factor")
    if af is None:
        m, m_all = rs.get("mscale"), rs.get("mscale_all_dim")
        af = get_mscale(factor, m) / get_mscale(factor, m_all) if m and m_all else get_mscale(factor)
    beta_fast = rs.get("beta_fast") or 32
    beta_slow = rs.get("beta_slow") or 1

    def corr_dim(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if rs.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    extra_factor = 1 - ramp
    inv = (1.0 / (factor * pos_freqs)) * (1 - extra_factor) + (1.0 / pos_freqs) * extra_factor
    return inv, af


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def swiglu_mlp(h, w, prefix, names=("gate_proj", "up_proj", "down_proj")):
    g = h @ w[f"{prefix}.{names[0]}.weight"].T
    u = h @ w[f"{prefix}.{names[1]}.weight"].T
    return (torch.nn.functional.silu(g) * u) @ w[f"{prefix}.{names[2]}.weight"].T


def route_softmax(logits, k, norm):
    """Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock: softmax in float32, top-k, optional renormalisation."""
    rw = torch.softmax(logits.to(torch.float32), dim=-1, dtype=torch.float32)
    rw, sel = torch.topk(rw, k, dim=-1)
    if norm:
        rw = rw / rw.sum(dim=-1, keepdim=True)
    return sel, rw.to(torch.float64)


def route_deepseek(logits, bias, cfg):
    """DeepseekV3TopkRouter: sigmoid scores in float32, group-limited top-k on scores + bias."""
    E, G, TG = cfg["n_routed_experts"], cfg["n_group"], cfg["topk_group"]
    scores = logits.to(torch.float32).sigmoid()
    choice = scores + bias.to(torch.float32).unsqueeze(0)
    group_scores = choice.view(-1, G, E // G).topk(2, dim=-1)[0].sum(dim=-1)
    group_idx = torch.topk(group_scores, k=TG, dim=-1, sorted=False)[1]
    group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1)
    score_mask = group_mask.unsqueeze(-1).expand(-1, G, E // G).reshape(-1, E)
    choice = choice.masked_fill(~score_mask.bool(), 0.0)
    sel = torch.topk(choice, k=cfg["num_experts_per_tok"], dim=-1, sorted=False)[1]
    rw = scores.gather(1, sel)
    if cfg.get("norm_topk_prob", True):
        rw = rw / (rw.sum(dim=-1, keepdim=True) + 1e-20)
    return sel, (rw * cfg["routed_scaling_factor"]).to(torch.float64)


def moe_block(h, w, p, arch, cfg):
    """A sparse MoE MLP: route, run each chosen expert over its tokens, add weighted (in expert order)."""
    if arch == "MixtralForCausalLM":
        block, names, E = p + "block_sparse_moe", ("w1", "w3", "w2"), cfg["num_local_experts"]
    else:
        block, names = p + "mlp", ("gate_proj", "up_proj", "down_proj")
        E = cfg.get("num_experts") or cfg.get("n_routed_experts")
    logits = h @ w[block + ".gate.weight"].T
    if arch == "DeepseekV3ForCausalLM":
        sel, rw = route_deepseek(logits, w[block + ".gate.e_score_correction_bias"], cfg)
    else:
        norm = True if arch == "MixtralForCausalLM" else cfg.get("norm_topk_prob", False)
        sel, rw = route_softmax(logits, cfg["num_experts_per_tok"], norm)
    out = torch.zeros_like(h)
    for e in range(E):
        tok, slot = torch.where(sel == e)
        if tok.numel():
            out.index_add_(0, tok, swiglu_mlp(h[tok], w, f"{block}.experts.{e}", names) * rw[tok, slot, None])
    if arch == "DeepseekV3ForCausalLM":
        out = out + swiglu_mlp(h, w, block + ".shared_experts")
    return out


def gpt_oss_moe(h, w, p, cfg):
    """GptOssMLP: GptOssTopKRouter then GptOssExperts' inference branch."""
    E, k = cfg["num_local_experts"], cfg["num_experts_per_tok"]
    b = p + "mlp."
    logits = h @ w[b + "router.weight"].T + w[b + "router.bias"]
    top, idx = torch.topk(logits, k, dim=-1)
    top = torch.softmax(top, dim=1)
    scores = torch.zeros_like(logits).scatter_(1, idx, top)
    T = h.shape[0]
    limit, alpha = cfg.get("swiglu_limit", 7.0), 1.702
    hs = h.repeat(E, 1).view(E, T, -1)
    gate_up = torch.bmm(hs, w[b + "experts.gate_up_proj"]) + w[b + "experts.gate_up_proj_bias"][..., None, :]
    gate, up = gate_up[..., ::2], gate_up[..., 1::2]
    gate = gate.clamp(min=None, max=limit)
    up = up.clamp(min=-limit, max=limit)
    glu = gate * torch.sigmoid(gate * alpha)
    out = torch.bmm((up + 1) * glu, w[b + "experts.down_proj"]) + w[b + "experts.down_proj_bias"][..., None, :]
    return (out * scores.transpose(0, 1)[..., None]).sum(dim=0)


def is_sparse(arch, cfg, l):
    if arch == "Qwen3MoeForCausalLM":
        return l not in cfg.get("mlp_only_layers", []) and (l + 1) % cfg.get("decoder_sparse_step", 1) == 0
    if arch == "MixtralForCausalLM":
        return True
    if arch == "DeepseekV3ForCausalLM":
        return l >= cfg["first_k_dense_replace"]
    return False


def interleave(x):
    """apply_rotary_pos_emb_interleave's reordering: pairs (2i, 2i+1) -> halves."""
    *lead, d = x.shape
    return x.reshape(*lead, d // 2, 2).transpose(-1, -2).reshape(*lead, d)


def mla_attention(h, w, p, cfg, mask):
    """DeepseekV3Attention, eager, whole sequence."""
    T = h.shape[0]
    H = cfg["num_attention_heads"]
    nope, rope, vd = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"]
    kv_lora = cfg["kv_lora_rank"]
    a = p + "self_attn."
    if cfg.get("q_lora_rank"):
        q = rms_norm(h @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"], 1e-6) @ w[a + "q_b_proj.weight"].T
    else:
        q = h @ w[a + "q_proj.weight"].T
    q = q.view(T, H, nope + rope).transpose(0, 1)
    q_pass, q_rot = q[..., :nope], q[..., nope:]
    ckv = h @ w[a + "kv_a_proj_with_mqa.weight"].T
    k_pass, k_rot = ckv[:, :kv_lora], ckv[:, kv_lora:]
    kv = (rms_norm(k_pass, w[a + "kv_a_layernorm.weight"], 1e-6) @ w[a + "kv_b_proj.weight"].T).view(T, H, nope + vd).transpose(0, 1)
    k_pass, value = kv[..., :nope], kv[..., nope:]
    k_rot = k_rot.view(1, T, rope)
    scaling = (nope + rope) ** -0.5
    rs = cfg.get("rope_scaling")
    if rs and rs.get("rope_type", rs.get("type")) == "yarn":
        inv, af = yarn_inv_freq(cfg, rope)
    else:
        inv, af = inv_freq(cfg, rope), 1.0
    if rs is not None and rs.get("mscale_all_dim", 0):
        m = get_mscale(rs["factor"], rs["mscale_all_dim"])
        scaling = scaling * m * m
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * af, emb.sin() * af
    if cfg.get("rope_interleave", True):
        q_rot, k_rot = interleave(q_rot), interleave(k_rot)
    q_rot = q_rot * cos + rotate_half(q_rot) * sin
    k_rot = k_rot * cos + rotate_half(k_rot) * sin
    query = torch.cat((q_pass, q_rot), dim=-1)
    key = torch.cat((k_pass, k_rot.expand(H, T, rope)), dim=-1)
    att = torch.softmax(query @ key.transpose(1, 2) * scaling + mask, dim=-1) @ value
    return att.transpose(0, 1).reshape(T, H * vd) @ w[a + "o_proj.weight"].T


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
    rs = cfg.get("rope_scaling")
    if arch == "GptOssForCausalLM" and rs and rs.get("rope_type", rs.get("type")) == "yarn":
        inv, af = yarn_inv_freq(cfg, hd)
    else:
        inv, af = inv_freq(cfg, hd), 1.0
    freqs = torch.outer(pos, inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos() * af, emb.sin() * af
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    window = cfg.get("sliding_window") if arch in ("MistralForCausalLM", "MixtralForCausalLM") else None
    if window:
        # Mistral attends to key positions k with q - window < k <= q.
        mask = mask + torch.full((T, T), float("-inf"), dtype=torch.float64).tril(-window)
    full_mask = mask
    if arch == "GptOssForCausalLM":
        # sliding_attention layers see keys k with q - window < k <= q.
        sliding_mask = mask + torch.full((T, T), float("-inf"), dtype=torch.float64).tril(-cfg["sliding_window"])
    bias = arch == "Qwen2ForCausalLM" or cfg.get("attention_bias", False)
    o_bias = arch != "Qwen2ForCausalLM" and cfg.get("attention_bias", False)

    x = w["model.embed_tokens.weight"][torch.tensor(ids)]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        if arch == "DeepseekV3ForCausalLM":
            x = x + mla_attention(h, w, p, cfg, mask)
            h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
            x = x + (moe_block(h, w, p, arch, cfg) if is_sparse(arch, cfg, l) else swiglu_mlp(h, w, p + "mlp"))
            continue
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
        if arch in ("Qwen3ForCausalLM", "Qwen3MoeForCausalLM"):
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=0)
        v = v.repeat_interleave(H // KV, dim=0)
        if arch == "GptOssForCausalLM":
            # eager_attention_forward with s_aux: a per-head sink logit joins the softmax, then is dropped.
            m = sliding_mask if cfg["layer_types"][l] == "sliding_attention" else full_mask
            logits = q @ k.transpose(1, 2) / math.sqrt(hd) + m
            sinks = w[p + "self_attn.sinks"].reshape(H, 1, 1).expand(H, T, 1)
            combined = torch.cat([logits, sinks], dim=-1)
            combined = combined - combined.max(dim=-1, keepdim=True).values
            att = torch.softmax(combined, dim=-1)[..., :-1] @ v
        else:
            att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + mask, dim=-1) @ v
        o = att.transpose(0, 1).reshape(T, H * hd) @ w[p + "self_attn.o_proj.weight"].T
        if o_bias:
            o = o + w[p + "self_attn.o_proj.bias"]
        x = x + o
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        if arch == "GptOssForCausalLM":
            x = x + gpt_oss_moe(h, w, p, cfg)
            continue
        x = x + (moe_block(h, w, p, arch, cfg) if is_sparse(arch, cfg, l) else swiglu_mlp(h, w, p + "mlp"))
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else w["lm_head.weight"]
    return x @ head.T


if __name__ == "__main__":
    req = json.load(sys.stdin)
    logits = forward(sys.argv[1], req["ids"])
    json.dump({"logits": logits.tolist()}, sys.stdout)
