"""An independent Llama forward and backward in NumPy (float64), the oracle for
ztune's single-rank training step on Llama-shaped models (Touvron et al. 2023),
written from the definitions in Hugging Face's modeling_llama: RMSNorm
(Zhang & Sennrich 2019), rotary positions in the rotate-half layout (Su et al.
2021), grouped-query attention by repeat_kv (Ainslie et al. 2023), the SwiGLU MLP
(Shazeer 2020), no biases, an untied lm_head.

Tensors use ztune's names and GPT-2's [in, out] layout (executor/param_specs.hpp):
h.L.attn.c_attn.weight = [Wq | Wk | Wv] (C × (C + 2·kv·hd)), h.L.mlp.c_fc.weight =
[W_gate | W_up] (C × 2F), h.L.mlp.c_proj.weight = W_down (F × C).
The check is gpt2_numpy.check_case's (loss 1e-4 relative, each gradient
max|a − b| ≤ 1e-4 · max|b|).

usage: llama_numpy.py WORKER MODEL_JSON
"""
import json
import sys

import numpy as np

import gpt2_numpy

EPS = 1e-5  # rms_norm_eps of Llama 2


def rmsnorm(x, w):
    r = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + EPS)
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
    rd = int(hd * m.get("rotary_fraction", 1.0))
    cos, sin = rope_tables(T, rd, m.get("rope_theta", 10000.0))
    mask = np.triu(np.ones((T, T), bool), 1)
    g = {k: np.zeros_like(v) for k, v in p.items()}
    x = p["wte.weight"][tokens]
    caches = []
    heads = lambda t, h: t.reshape(B, T, h, hd).transpose(0, 2, 1, 3)
    for l in range(L):
        h = f"h.{l}."
        x0 = x
        a1, c1 = rmsnorm(x, p[h + "ln_1.weight"])
        qkv = a1 @ p[h + "attn.c_attn.weight"]
        q = rope(heads(qkv[..., :C], NH), cos, sin)
        k = rope(heads(qkv[..., C:C + KV * hd], KV), cos, sin)
        v = heads(qkv[..., C + KV * hd:], KV)
        kr, vr = np.repeat(k, grp, axis=1), np.repeat(v, grp, axis=1)  # repeat_kv
        s = q @ kr.transpose(0, 1, 3, 2) / np.sqrt(hd)
        s[..., mask] = -np.inf
        s = np.exp(s - s.max(-1, keepdims=True))
        att = s / s.sum(-1, keepdims=True)
        y = (att @ vr).transpose(0, 2, 1, 3).reshape(B, T, C)
        x1 = x0 + y @ p[h + "attn.c_proj.weight"]
        a2, c2 = rmsnorm(x1, p[h + "ln_2.weight"])
        f = a2 @ p[h + "mlp.c_fc.weight"]
        gate, up = f[..., :F], f[..., F:]
        act = silu(gate) * up
        x = x1 + act @ p[h + "mlp.c_proj.weight"]
        caches.append((a1, c1, q, kr, vr, att, y, c2, a2, gate, up, act))
    xf, cf = rmsnorm(x, p["ln_f.weight"])
    logits = xf @ p["lm_head.weight"].T
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    n = B * T
    loss = -np.take_along_axis(logp, targets[..., None], -1).mean()
    # Backward.
    dlogits = np.exp(logp)
    np.put_along_axis(dlogits, targets[..., None], np.take_along_axis(dlogits, targets[..., None], -1) - 1, -1)
    dlogits /= n
    g["lm_head.weight"] += dlogits.reshape(n, -1).T @ xf.reshape(n, C)
    dx, g["ln_f.weight"] = rmsnorm_back(dlogits @ p["lm_head.weight"], p["ln_f.weight"], cf)
    for l in reversed(range(L)):
        h = f"h.{l}."
        a1, c1, q, kr, vr, att, y, c2, a2, gate, up, act = caches[l]
        # MLP: x = x1 + (silu(gate)·up) W_down
        g[h + "mlp.c_proj.weight"] = act.reshape(n, -1).T @ dx.reshape(n, C)
        dact = dx @ p[h + "mlp.c_proj.weight"].T
        sig = 1.0 / (1.0 + np.exp(-gate))
        dgate = dact * up * (sig + gate * sig * (1 - sig))
        dup = dact * silu(gate)
        df = np.concatenate([dgate, dup], -1)
        g[h + "mlp.c_fc.weight"] = a2.reshape(n, C).T @ df.reshape(n, -1)
        dx1, g[h + "ln_2.weight"] = rmsnorm_back(df @ p[h + "mlp.c_fc.weight"].T, p[h + "ln_2.weight"], c2)
        dx1 = dx1 + dx
        # Attention
        g[h + "attn.c_proj.weight"] = y.reshape(n, C).T @ dx1.reshape(n, C)
        dy = (dx1 @ p[h + "attn.c_proj.weight"].T).reshape(B, T, NH, hd).transpose(0, 2, 1, 3)
        datt = dy @ vr.transpose(0, 1, 3, 2)
        dvr = att.transpose(0, 1, 3, 2) @ dy
        ds = att * (datt - (att * datt).sum(-1, keepdims=True)) / np.sqrt(hd)
        dq = ds @ kr
        dkr = ds.transpose(0, 1, 3, 2) @ q
        # repeat_kv's adjoint: each K/V head collects its group's gradients.
        dk = dkr.reshape(B, KV, grp, T, hd).sum(2)
        dv = dvr.reshape(B, KV, grp, T, hd).sum(2)
        dq, dk = rope(dq, cos, sin, inverse=True), rope(dk, cos, sin, inverse=True)
        flat = lambda t: t.transpose(0, 2, 1, 3).reshape(B, T, -1)
        dqkv = np.concatenate([flat(dq), flat(dk), flat(dv)], -1)
        g[h + "attn.c_attn.weight"] = a1.reshape(n, C).T @ dqkv.reshape(n, -1)
        dx0, g[h + "ln_1.weight"] = rmsnorm_back(dqkv @ p[h + "attn.c_attn.weight"].T, p[h + "ln_1.weight"], c1)
        dx = dx0 + dx1
    np.add.at(g["wte.weight"], tokens.reshape(-1), dx.reshape(n, C))
    return loss, g


def random_weights(rng, m):
    C, F, V, L = m["hidden"], m["ffn_hidden"], m["vocab"], m["layers"]
    kvc = m["kv_heads"] * (C // m["heads"])
    p = {"wte.weight": rng.normal(0, 0.1, (V, C)), "lm_head.weight": rng.normal(0, 0.1, (V, C)),
         "ln_f.weight": 1 + rng.normal(0, 0.1, C)}
    for l in range(L):
        h = f"h.{l}."
        p[h + "ln_1.weight"] = 1 + rng.normal(0, 0.1, C)
        p[h + "attn.c_attn.weight"] = rng.normal(0, 0.1, (C, C + 2 * kvc))
        p[h + "attn.c_proj.weight"] = rng.normal(0, 0.1, (C, C))
        p[h + "ln_2.weight"] = 1 + rng.normal(0, 0.1, C)
        p[h + "mlp.c_fc.weight"] = rng.normal(0, 0.1, (C, 2 * F))
        p[h + "mlp.c_proj.weight"] = rng.normal(0, 0.1, (F, C))
    # Round to fp32 so that both sides start from the same values.
    return {k: v.astype(np.float32).astype(np.float64) for k, v in p.items()}


def main():
    worker, model_path = sys.argv[1], sys.argv[2]
    m = json.load(open(model_path))
    assert m["norm"] == "rmsnorm" and m["activation"] == "swiglu" and not m["bias"] and not m["tied_embeddings"]
    failures = 0
    cases = [("llama GQA", m, {}), ("llama GQA, selective recompute", m, dict(recompute="selective")),
             ("llama MHA", dict(m, kv_heads=m["heads"]), {}), ("llama MQA", dict(m, kv_heads=1), {}),
             # GPT-NeoX's partial rotary: 4 of each head's 16 channels turn.
             ("llama GQA, rotary on a quarter of each head", dict(m, rotary_fraction=0.25), {})]
    for label, model, kw in cases:
        failures += gpt2_numpy.check_case(worker, model, label, kw, None, weights=random_weights,
                                          reference=lambda p, x, y, model=model: step(p, x, y, model))
    print(f"{len(cases)} cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
