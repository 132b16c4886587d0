"""An independent decoder forward and backward in NumPy (float64) for the model
shapes beyond GPT-2 (gpt2_numpy.py has GPT-2's): the oracle for ztune's
single-rank training step on Llama-shaped models (Touvron et al. 2023; Hugging
Face's modeling_llama: RMSNorm, rotary positions in the rotate-half layout,
grouped-query attention by repeat_kv, the SwiGLU MLP, no biases, an untied
lm_head) and GPT-NeoX-shaped ones (Black et al. 2022; modeling_gpt_neox:
LayerNorm and biases, RoPE on the first rotary_pct of each head, attention and
MLP in parallel: x + attn(ln1(x)) + mlp(ln2(x))). Each feature follows the
model file, so one step() covers both families and their mixtures.

Tensors use ztune's names and GPT-2's [in, out] layout (executor/param_specs.hpp):
h.L.attn.c_attn.weight = [Wq | Wk | Wv] (C × (C + 2·kv·hd)), h.L.mlp.c_fc.weight =
[W_gate | W_up] (C × 2F) under SwiGLU, h.L.mlp.c_proj.weight (F × C).
Every norm uses the model file's norm_eps (default 1e-5, as ztune reads it).
The check is gpt2_numpy.check_case's (loss 1e-4 relative, each gradient
max|a − b| ≤ 1e-4 · max|b|).

usage: decoder_numpy.py WORKER MODEL_JSON
"""
import json
import sys

import numpy as np

import gpt2_numpy

def rmsnorm(x, w, eps):
    """Hugging Face's LlamaRMSNorm: x·rsqrt(mean(x²) + ε)·w, ε = rms_norm_eps."""
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    xhat = x * r
    return xhat * w, (xhat, r)


def rmsnorm_back(dy, w, cache):
    xhat, r = cache
    dxhat = dy * w
    dx = r * (dxhat - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx, (dy * xhat).reshape(-1, w.size).sum(0)


def rope_tables(T, rd, theta):
    """cos/sin [T, rd/2] for RoPE on the first rd channels of a head (GPT-NeoX's
    rotary_ndims; rd = hd for Llama)."""
    inv_freq = theta ** (-np.arange(0, rd, 2) / rd)  # θ^(−2i/rd), i < rd/2
    ang = np.arange(T)[:, None] * inv_freq[None, :]
    return np.cos(ang), np.sin(ang)


def rope(x, cos, sin, inverse=False):
    """x [B, H, T, hd]; rotate_half on the first rd = 2·cos.shape[-1] channels:
    (x1, x2) → (x1·cos − x2·sin, x2·cos + x1·sin); the others pass (GPT-NeoX)."""
    s = -sin if inverse else sin
    half = cos.shape[-1]
    x1, x2, rest = x[..., :half], x[..., half:2 * half], x[..., 2 * half:]
    return np.concatenate([x1 * cos - x2 * s, x2 * cos + x1 * s, rest], -1)


def silu(a):
    return a / (1.0 + np.exp(-a))


def step(p, tokens, targets, m):
    B, T = tokens.shape
    L, NH, KV = m["layers"], m["heads"], m["kv_heads"]
    C = p["wte.weight"].shape[1]
    hd, F, grp = C // NH, m["ffn_hidden"], NH // KV
    rotary, bias = m["position_embedding"] == "rotary", m["bias"]
    layer = m["norm"] == "layernorm"
    eps = gpt2_numpy.norm_eps(m)  # every norm's ε: layer_norm_eps (GPT-NeoX), rms_norm_eps (Llama)
    swiglu, parallel = m["activation"] == "swiglu", m.get("parallel_residual", False)
    head_w = "wte.weight" if m["tied_embeddings"] else "lm_head.weight"
    if rotary:
        cos, sin = rope_tables(T, int(hd * m.get("rotary_fraction", 1.0)), m.get("rope_theta", 10000.0))
    mask = np.triu(np.ones((T, T), bool), 1)
    window = m.get("attention_window", 0)
    if 0 < window < T:  # sliding window (Mistral): query i sees keys i - window + 1 .. i
        mask |= np.tril(np.ones((T, T), bool), -window)
    g = {k: np.zeros_like(v) for k, v in p.items()}

    def norm(x, name):
        if layer:
            return gpt2_numpy.layernorm(x, p[name + ".weight"], p[name + ".bias"], eps)
        return rmsnorm(x, p[name + ".weight"], eps)

    def norm_back(dy, name, cache):
        if layer:
            dx, g[name + ".weight"], g[name + ".bias"] = gpt2_numpy.layernorm_back(dy, p[name + ".weight"], cache)
        else:
            dx, g[name + ".weight"] = rmsnorm_back(dy, p[name + ".weight"], cache)
        return dx

    def has_bias(name):  # Qwen2: biases on the Q/K/V projection only (qkv_bias)
        return bias or (m.get("qkv_bias", False) and name.endswith("attn.c_attn"))

    def linear(x, name):
        return x @ p[name + ".weight"] + (p[name + ".bias"] if has_bias(name) else 0.0)

    def linear_back(dy, x, name):
        n = B * T
        g[name + ".weight"] = x.reshape(n, -1).T @ dy.reshape(n, -1)
        if has_bias(name):
            g[name + ".bias"] = dy.reshape(n, -1).sum(0)
        return dy @ p[name + ".weight"].T

    def heads(t, h):
        return t.reshape(B, T, h, hd).transpose(0, 2, 1, 3)

    def attention(x, h):
        a1, c1 = norm(x, h + "ln_1")
        qkv = linear(a1, h + "attn.c_attn")
        q, k = heads(qkv[..., :C], NH), heads(qkv[..., C:C + KV * hd], KV)
        v = heads(qkv[..., C + KV * hd:], KV)
        if rotary:
            q, k = rope(q, cos, sin), rope(k, cos, sin)
        kr, vr = np.repeat(k, grp, axis=1), np.repeat(v, grp, axis=1)  # repeat_kv
        s = q @ kr.transpose(0, 1, 3, 2) / np.sqrt(hd)
        s[..., mask] = -np.inf
        s = np.exp(s - s.max(-1, keepdims=True))
        att = s / s.sum(-1, keepdims=True)
        y = (att @ vr).transpose(0, 2, 1, 3).reshape(B, T, C)
        return linear(y, h + "attn.c_proj"), (a1, c1, q, kr, vr, att, y)

    def attention_back(dout, h, cache):
        a1, c1, q, kr, vr, att, y = cache
        dy = linear_back(dout, y, h + "attn.c_proj").reshape(B, T, NH, hd).transpose(0, 2, 1, 3)
        datt = dy @ vr.transpose(0, 1, 3, 2)
        dvr = att.transpose(0, 1, 3, 2) @ dy
        ds = att * (datt - (att * datt).sum(-1, keepdims=True)) / np.sqrt(hd)
        dq, dkr = ds @ kr, ds.transpose(0, 1, 3, 2) @ q
        # repeat_kv's adjoint: each K/V head collects its group's gradients.
        dk, dv = dkr.reshape(B, KV, grp, T, hd).sum(2), dvr.reshape(B, KV, grp, T, hd).sum(2)
        if rotary:
            dq, dk = rope(dq, cos, sin, inverse=True), rope(dk, cos, sin, inverse=True)
        flat = lambda t: t.transpose(0, 2, 1, 3).reshape(B, T, -1)  # noqa: E731
        dqkv = np.concatenate([flat(dq), flat(dk), flat(dv)], -1)
        return norm_back(linear_back(dqkv, a1, h + "attn.c_attn"), h + "ln_1", c1)

    def mlp(x, h):
        a2, c2 = norm(x, h + "ln_2")
        f = linear(a2, h + "mlp.c_fc")
        act = silu(f[..., :F]) * f[..., F:] if swiglu else gpt2_numpy.gelu(f)
        return linear(act, h + "mlp.c_proj"), (a2, c2, f, act)

    def mlp_back(dout, h, cache):
        a2, c2, f, act = cache
        dact = linear_back(dout, act, h + "mlp.c_proj")
        if swiglu:
            gate, up = f[..., :F], f[..., F:]
            sig = 1.0 / (1.0 + np.exp(-gate))
            df = np.concatenate([dact * up * (sig + gate * sig * (1 - sig)), dact * silu(gate)], -1)
        else:
            df = gpt2_numpy.gelu_back(f, dact)
        return norm_back(linear_back(df, a2, h + "mlp.c_fc"), h + "ln_2", c2)

    x = p["wte.weight"][tokens] + (p["wpe.weight"][np.arange(T)][None] if "wpe.weight" in p else 0.0)
    caches = []
    for l in range(L):
        h = f"h.{l}."
        a, ca = attention(x, h)
        if parallel:
            f, cm = mlp(x, h)
            x = x + a + f
        else:
            x1 = x + a
            f, cm = mlp(x1, h)
            x = x1 + f
        caches.append((ca, cm))
    xf, cf = norm(x, "ln_f")
    n = B * T
    loss, dxf, dw = gpt2_numpy.lm_head_loss(xf, p[head_w], targets)
    # Backward.
    g[head_w] += dw
    dx = norm_back(dxf, "ln_f", cf)
    for l in reversed(range(L)):
        h = f"h.{l}."
        ca, cm = caches[l]
        if parallel:
            dx = dx + mlp_back(dx, h, cm) + attention_back(dx, h, ca)
        else:
            dx1 = dx + mlp_back(dx, h, cm)
            dx = dx1 + attention_back(dx1, h, ca)
    np.add.at(g["wte.weight"], tokens.reshape(-1), dx.reshape(n, C))
    if "wpe.weight" in p:
        g["wpe.weight"][:T] += dx.sum(0)
    return loss, g


def random_weights(rng, m):
    C, F, V, L = m["hidden"], m["ffn_hidden"], m["vocab"], m["layers"]
    kvc = m["kv_heads"] * (C // m["heads"])
    fc = 2 * F if m["activation"] == "swiglu" else F
    layer, bias = m["norm"] == "layernorm", m["bias"]
    p = {"wte.weight": rng.normal(0, 0.1, (V, C))}
    if not m["tied_embeddings"]:
        p["lm_head.weight"] = rng.normal(0, 0.1, (V, C))
    if m["position_embedding"] == "learned":
        p["wpe.weight"] = rng.normal(0, 0.1, (m["seq_len"], C))

    def norm(name):
        p[name + ".weight"] = 1 + rng.normal(0, 0.1, C)
        if layer:
            p[name + ".bias"] = rng.normal(0, 0.1, C)

    def linear(name, rows, cols):
        p[name + ".weight"] = rng.normal(0, 0.1, (rows, cols))
        if bias or (m.get("qkv_bias", False) and name.endswith("attn.c_attn")):
            p[name + ".bias"] = rng.normal(0, 0.1, cols)

    for l in range(L):
        h = f"h.{l}."
        norm(h + "ln_1")
        linear(h + "attn.c_attn", C, C + 2 * kvc)
        linear(h + "attn.c_proj", C, C)
        norm(h + "ln_2")
        linear(h + "mlp.c_fc", C, fc)
        linear(h + "mlp.c_proj", F, C)
    norm("ln_f")
    # Round to fp32 so that both sides start from the same values.
    return {k: v.astype(np.float32).astype(np.float64) for k, v in p.items()}


def main():
    worker, model_path = sys.argv[1], sys.argv[2]
    m = json.load(open(model_path))
    name = m["name"]
    # A large ε (0.5, against rows whose mean square is ~0.01-1 with weights
    # N(0, 0.1)) moves the loss and every gradient far beyond the 1e-4 tolerance
    # unless ztune normalizes with the model's norm_eps.
    if m.get("parallel_residual"):  # GPT-NeoX's shape
        cases = [(f"{name}", m, {}), (f"{name}, selective recompute", m, dict(recompute="selective")),
                 (f"{name}, sequential blocks", dict(m, parallel_residual=False), {}),
                 (f"{name}, LayerNorm eps 0.5", dict(m, norm_eps=0.5), {})]
    else:  # Llama's
        cases = [(f"{name} GQA", m, {}), (f"{name} GQA, selective recompute", m, dict(recompute="selective")),
                 (f"{name} MHA", dict(m, kv_heads=m["heads"]), {}), (f"{name} MQA", dict(m, kv_heads=1), {}),
                 # GPT-NeoX's partial rotary: 4 of each head's 16 channels turn.
                 (f"{name} GQA, rotary on a quarter of each head", dict(m, rotary_fraction=0.25), {}),
                 # No position information at all (MPT with every option off): no wpe, no rotation.
                 (f"{name} GQA, no positions", dict(m, position_embedding="none"), {}),
                 (f"{name} GQA, RMSNorm eps 0.5", dict(m, norm_eps=0.5), {}),
                 # Qwen2: biases on the Q, K and V projections only.
                 (f"{name} GQA, Q/K/V biases (Qwen2)", dict(m, qkv_bias=True), {}),
                 # Mistral: a sliding window of 24 of the 64 positions, with each kernel.
                 (f"{name} GQA, sliding window 24", dict(m, attention_window=24), {}),
                 (f"{name} GQA, sliding window 24, flash", dict(m, attention_window=24), dict(attention="flash")),
                 (f"{name} GQA, sliding window 24, selective recompute", dict(m, attention_window=24),
                  dict(recompute="selective"))]
    failures = 0
    for label, model, kw in cases:
        failures += gpt2_numpy.check_case(worker, model, label, kw, None, weights=random_weights,
                                          reference=lambda p, x, y, model=model: step(p, x, y, model))
    print(f"{len(cases)} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
