"""An independent GPT-2 forward and backward in NumPy (float64), the oracle for
ztune's single-rank training step (STYLE.md #6, after llm.c's test_gpt2).

It writes random weights (Hugging Face GPT-2 names, safetensors) and a uint16
token file, runs one step of ztune-worker on them (--init-from, --data,
--dump-grads), and checks the loss and every parameter's gradient against its own
computation: relative 1e-4 (the loss) and max|a − b| ≤ 1e-4 · max|b| per tensor.
ztune computes in fp32 and this script in float64; fp32 sums of a few thousand
terms are good to ~1e-6 relative, so 1e-4 leaves two orders of margin without
hiding a wrong formula (those show up as O(1) errors).

usage: gpt2_numpy.py WORKER MODEL_JSON
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "executor"))
import plans  # noqa: E402
import safetensors_np  # noqa: E402

EPS = 1e-5  # GPT-2's layer_norm_epsilon: the model file's norm_eps when it has none


def norm_eps(m):
    """The ε of the model's norms: its "norm_eps", else 1e-5 (docs/formats.md)."""
    return m.get("norm_eps", EPS)


def layernorm(x, w, b, eps=EPS):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    xhat = (x - mu) * rstd
    return xhat * w + b, (xhat, rstd)


def layernorm_back(dy, w, cache):
    xhat, rstd = cache
    dxhat = dy * w
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx, (dy * xhat).reshape(-1, w.size).sum(0), dy.reshape(-1, w.size).sum(0)


K = np.sqrt(2.0 / np.pi)


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(K * (x + 0.044715 * x ** 3)))


def gelu_back(x, dy):
    t = np.tanh(K * (x + 0.044715 * x ** 3))
    return dy * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * K * (1 + 3 * 0.044715 * x * x))


def lm_head_loss(xf, w, targets):
    """Mean cross-entropy of logits xf·wᵀ against targets, and its gradients with
    respect to xf [B, T, C] and w [V, C]."""
    logits = xf @ w.T
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    n = targets.size
    loss = -np.take_along_axis(logp, targets[..., None], -1).mean()
    dlogits = np.exp(logp)
    np.put_along_axis(dlogits, targets[..., None], np.take_along_axis(dlogits, targets[..., None], -1) - 1, -1)
    dlogits /= n
    return loss, dlogits @ w, dlogits.reshape(n, -1).T @ xf.reshape(n, -1)


def fixed_sparse_mask(T, block, window=4):
    """Masked (True) query/key pairs of DeepSpeed's FixedSparsityConfig with
    attention='unidirectional' and its defaults (Child et al. 2019's "fixed"
    pattern): a query sees the keys of its own window of `window` blocks and the
    last block of every window (a global column), never a later token. Written
    from the pattern's definition, not from ztune's layout builder."""
    i = np.arange(T)
    bi, bj = (i // block)[:, None], (i // block)[None, :]
    allowed = (i[None, :] <= i[:, None]) & ((bi // window == bj // window) | (bj % window == window - 1))
    return ~allowed


def step(p, tokens, targets, L, NH, mask=None, eps=EPS):
    """Loss and gradients (dict like p) of the mean cross-entropy; `mask`
    (T×T, True = masked) defaults to dense causal attention; `eps` is the
    LayerNorms' ε."""
    B, T = tokens.shape
    C = p["wte.weight"].shape[1]
    hd = C // NH
    g = {k: np.zeros_like(v) for k, v in p.items()}
    x = p["wte.weight"][tokens] + p["wpe.weight"][np.arange(T)][None]
    if mask is None:
        mask = np.triu(np.ones((T, T), bool), 1)
    caches = []
    for l in range(L):
        h = f"h.{l}."
        x0 = x
        a1, c1 = layernorm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps)
        qkv = a1 @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, NH, hd).transpose(0, 2, 1, 3) for i in range(3))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)
        s[..., mask] = -np.inf
        s = np.exp(s - s.max(-1, keepdims=True))
        att = s / s.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x1 = x0 + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        a2, c2 = layernorm(x1, p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps)
        f = a2 @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"]
        gf = gelu(f)
        x = x1 + gf @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
        caches.append((x0, a1, c1, q, k, v, att, y, x1, a2, c2, f, gf))
    xf, cf = layernorm(x, p["ln_f.weight"], p["ln_f.bias"], eps)
    n = B * T
    loss, dxf, dw = lm_head_loss(xf, p["wte.weight"], targets)
    g["wte.weight"] += dw
    dx, g["ln_f.weight"], g["ln_f.bias"] = layernorm_back(dxf, p["ln_f.weight"], cf)
    for l in reversed(range(L)):
        h = f"h.{l}."
        x0, a1, c1, q, k, v, att, y, x1, a2, c2, f, gf = caches[l]
        # MLP
        g[h + "mlp.c_proj.bias"] = dx.reshape(n, C).sum(0)
        g[h + "mlp.c_proj.weight"] = gf.reshape(n, -1).T @ dx.reshape(n, C)
        dgf = dx @ p[h + "mlp.c_proj.weight"].T
        df = gelu_back(f, dgf)
        g[h + "mlp.c_fc.bias"] = df.reshape(n, -1).sum(0)
        g[h + "mlp.c_fc.weight"] = a2.reshape(n, C).T @ df.reshape(n, -1)
        da2 = df @ p[h + "mlp.c_fc.weight"].T
        dx1, g[h + "ln_2.weight"], g[h + "ln_2.bias"] = layernorm_back(da2, p[h + "ln_2.weight"], c2)
        dx1 = dx1 + dx
        # Attention
        g[h + "attn.c_proj.bias"] = dx1.reshape(n, C).sum(0)
        g[h + "attn.c_proj.weight"] = y.reshape(n, C).T @ dx1.reshape(n, C)
        dy = (dx1 @ p[h + "attn.c_proj.weight"].T).reshape(B, T, NH, hd).transpose(0, 2, 1, 3)
        datt = dy @ v.transpose(0, 1, 3, 2)
        dv = att.transpose(0, 1, 3, 2) @ dy
        ds = att * (datt - (att * datt).sum(-1, keepdims=True)) / np.sqrt(hd)
        dq = ds @ k
        dk = ds.transpose(0, 1, 3, 2) @ q
        dqkv = np.concatenate([t.transpose(0, 2, 1, 3).reshape(B, T, C) for t in (dq, dk, dv)], -1)
        g[h + "attn.c_attn.bias"] = dqkv.reshape(n, -1).sum(0)
        g[h + "attn.c_attn.weight"] = a1.reshape(n, C).T @ dqkv.reshape(n, -1)
        da1 = dqkv @ p[h + "attn.c_attn.weight"].T
        dx0, g[h + "ln_1.weight"], g[h + "ln_1.bias"] = layernorm_back(da1, p[h + "ln_1.weight"], c1)
        dx = dx0 + dx1
    np.add.at(g["wte.weight"], tokens.reshape(-1), dx.reshape(n, C))
    g["wpe.weight"][:T] += dx.sum(0)
    return loss, g


def random_weights(rng, m):
    C, F, V, T, L = m["hidden"], m["ffn_hidden"], m["vocab"], m["seq_len"], m["layers"]
    p = {"wte.weight": rng.normal(0, 0.1, (V, C)), "wpe.weight": rng.normal(0, 0.1, (T, C))}
    for l in range(L):
        h = f"h.{l}."
        p[h + "ln_1.weight"] = 1 + rng.normal(0, 0.1, C)
        p[h + "ln_1.bias"] = rng.normal(0, 0.1, C)
        p[h + "attn.c_attn.weight"] = rng.normal(0, 0.1, (C, 3 * C))
        p[h + "attn.c_attn.bias"] = rng.normal(0, 0.1, 3 * C)
        p[h + "attn.c_proj.weight"] = rng.normal(0, 0.1, (C, C))
        p[h + "attn.c_proj.bias"] = rng.normal(0, 0.1, C)
        p[h + "ln_2.weight"] = 1 + rng.normal(0, 0.1, C)
        p[h + "ln_2.bias"] = rng.normal(0, 0.1, C)
        p[h + "mlp.c_fc.weight"] = rng.normal(0, 0.1, (C, F))
        p[h + "mlp.c_fc.bias"] = rng.normal(0, 0.1, F)
        p[h + "mlp.c_proj.weight"] = rng.normal(0, 0.1, (F, C))
        p[h + "mlp.c_proj.bias"] = rng.normal(0, 0.1, C)
    p["ln_f.weight"] = 1 + rng.normal(0, 0.1, C)
    p["ln_f.bias"] = rng.normal(0, 0.1, C)
    # Round to fp32 so that both sides start from the same values.
    return {k: v.astype(np.float32).astype(np.float64) for k, v in p.items()}


def check_case(worker, m, label, plan_kw, mask, weights=None, reference=None, file_dtype="F32", prefix=""):
    """One training step of ztune-worker against `reference` (default step(), from
    `weights`, default random_weights, written to the --init-from file as
    `file_dtype` under `prefix`); returns the failures."""
    weights = weights or random_weights
    reference = reference or (lambda p, x, y: step(p, x, y, m["layers"], m["heads"], mask, norm_eps(m)))
    rng = np.random.default_rng(2024)
    B, T, V = 2, m["seq_len"], m["vocab"]
    p = weights(rng, m)
    stream = rng.integers(0, V, size=B * T + 1 + 7, dtype=np.uint16)
    with tempfile.TemporaryDirectory() as d:
        safetensors_np.save(os.path.join(d, "init.safetensors"), p, file_dtype, prefix)
        stream.astype("<u2").tofile(os.path.join(d, "tokens.bin"))
        plans.write_plan_file(os.path.join(d, "plan.json"), m, mb=B, ga=1, **plan_kw)
        cmd = [worker, os.path.join(d, "plan.json"), "--steps", "1", "--init-from",
               os.path.join(d, "init.safetensors"), "--data", os.path.join(d, "tokens.bin"),
               "--dump-grads", os.path.join(d, "grads.safetensors"), "--record", os.path.join(d, "record.json")]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            return 1
        ours_loss = json.load(open(os.path.join(d, "record.json")))["losses"][0]
        ours = safetensors_np.load(os.path.join(d, "grads.safetensors"))
    # ztune's sequence j starts at token j·T (token file reader), targets shifted by one.
    seqs = np.stack([stream[j * T:j * T + T + 1].astype(np.int64) for j in range(B)])
    loss, grads = reference(p, seqs[:, :-1], seqs[:, 1:])
    failures = 0
    loss_err = abs(ours_loss - loss) / abs(loss)
    print(f"{label}: loss ztune {ours_loss:.7f} numpy {loss:.7f} rel err {loss_err:.1e}")
    failures += loss_err > 1e-4
    worst = 0.0
    if set(ours) != set(grads):
        print(f"FAIL {label}: tensors only in ztune {sorted(set(ours) - set(grads))}, "
              f"only in the reference {sorted(set(grads) - set(ours))}")
        return failures + 1
    for k, ref in grads.items():
        err = float(np.max(np.abs(ours[k] - ref)) / np.max(np.abs(ref)))
        worst = max(worst, err)
        if err > 1e-4 or ours[k].shape != ref.shape:
            failures += 1
            print(f"FAIL {label} gradient {k}: rel err {err:.2e}")
    print(f"{label}: gradients of {len(grads)} tensors, worst rel err {worst:.1e}")
    return failures


def main():
    worker, model_path = sys.argv[1], sys.argv[2]
    m = json.load(open(model_path))
    failures = check_case(worker, m, "dense", {}, None)
    # The flash kernel (log-sum-exp kept, probabilities recomputed in backward)
    # against the same NumPy attention.
    failures += check_case(worker, m, "dense flash", dict(attention="flash"), None)
    # Block-sparse attention (DeepSpeed "fixed"; its blocks are 16 tokens or
    # more): the same model at sequence 128 is 8 blocks of 16 in two windows of
    # 4, so a query in the second window skips blocks 0-2.
    long_m = dict(m, seq_len=128)
    T = long_m["seq_len"]
    mask = fixed_sparse_mask(T, 16)
    print(f"fixed sparse mask, blocks of 16: {int((~mask).sum())} of {T * (T + 1) // 2} causal pairs attended")
    failures += check_case(worker, long_m, "sparse fixed/16", dict(sparse="fixed", sparse_block=16), mask)
    # The model's norm_eps reaches every LayerNorm: ε = 0.5 against rows whose
    # variance is ~0.01-1 (weights N(0, 0.1)) moves the loss and the gradients by
    # far more than the 1e-4 tolerance if ztune normalized with another ε.
    failures += check_case(worker, dict(m, norm_eps=0.5), "dense, LayerNorm eps 0.5", {}, None)
    # Weight files in 16 bits (most published checkpoints): the worker widens
    # them to fp32 exactly, so the reference on the rounded weights holds to the
    # same tolerance. Hugging Face's save_pretrained prefixes "transformer.".
    def rounded(rnd):
        return lambda rng, model: {k: rnd(v) for k, v in random_weights(rng, model).items()}
    failures += check_case(worker, m, "dense, weights read from BF16", {}, None,
                           weights=rounded(safetensors_np.round_bf16), file_dtype="BF16", prefix="transformer.")
    failures += check_case(worker, m, "dense, weights read from F16", {}, None,
                           weights=rounded(lambda v: v.astype(np.float16).astype(np.float64)), file_dtype="F16")
    print(f"6 cases, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
