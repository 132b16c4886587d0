#!/usr/bin/env python3
"""PyTorch's side of bench_gpt_train (issue 24): the same GPT shapes trained the same way.

GPT-2 124M (L12 C768 H12, micro-batch 16), 350M (L24 C1024 H16, 16) and GPT-3 XL 1.3B
(L24 C2048 H16, 8), sequence 1024, vocabulary 50304, tied embeddings, learned positions,
pre-LayerNorm blocks with biases and tanh-GELU (the llm.c layout bench_gpt_train.cpp
uses). bf16 autocast over fp32 parameters (fp32 master weights and AdamW states, as
bench_gpt_train keeps them), attention through scaled_dot_product_attention restricted
to the flash backend, fused AdamW. One step = forward, cross-entropy, backward, AdamW;
2 warm-up steps, then the mean of 10 steps timed with CUDA events.

MFU uses the same model FLOPs per iteration as bench_gpt_train.cpp,
72·B·s·L·h²·(1 + s/(6h) + V/(12·h·L)) (Korthikanti et al. 2022, eq. 3), against
ZTUNE_PEAK_TFLOPS (default 989, dense bf16 of an H100/H200 SXM). The rows print in
bench_gpt_train's format so scripts/gpu-check.sh can put them side by side.

  python3 bench/gpu/bench_gpt_train_torch.py [--compile] [gpt2-124M gpt2-350M gpt3-1.3B]

Exits 77 (skipped) when torch or a CUDA device is missing.
"""
import math
import os
import sys

SEQ = 1024
VOCAB = 50304
EPS = 1e-5  # GPT-2's LayerNorm epsilon
WARMUP, STEPS = 2, 10
CONFIGS = [("gpt2-124M", 12, 768, 12, 16), ("gpt2-350M", 24, 1024, 16, 16), ("gpt3-1.3B", 24, 2048, 16, 8)]


def model_flops(batch, layers, channels):
    tokens, h, L = batch * SEQ, float(channels), float(layers)
    return 72.0 * tokens * L * h * h * (1.0 + SEQ / (6.0 * h) + VOCAB / (12.0 * h * L))


def build(torch, layers, channels, heads):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(channels, eps=EPS)
            self.qkv = nn.Linear(channels, 3 * channels)
            self.proj = nn.Linear(channels, channels)
            self.ln2 = nn.LayerNorm(channels, eps=EPS)
            self.fc = nn.Linear(channels, 4 * channels)
            self.fc_proj = nn.Linear(4 * channels, channels)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (y.view(b, t, heads, c // heads).transpose(1, 2) for y in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, channels)
            self.wpe = nn.Embedding(SEQ, channels)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.lnf = nn.LayerNorm(channels, eps=EPS)
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif p.dim() > 1:
                    # GPT-2's init: residual projections scaled by 1/sqrt(2L)
                    std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                    nn.init.normal_(p, 0.0, std)

        def forward(self, ids, targets):
            pos = torch.arange(ids.shape[1], device=ids.device)
            x = self.wte(ids) + self.wpe(pos)
            for blk in self.blocks:
                x = blk(x)
            logits = F.linear(self.lnf(x), self.wte.weight)  # tied embeddings
            return F.cross_entropy(logits.view(-1, VOCAB).float(), targets.view(-1))

    return Gpt()


def main(argv):
    try:
        import torch
    except ImportError:
        print("torch is not installed here: PyTorch benchmark skipped")
        return 77
    if not torch.cuda.is_available():
        print("no CUDA device: PyTorch benchmark skipped")
        return 77
    from torch.nn.attention import SDPBackend, sdpa_kernel

    compile_ = "--compile" in argv
    names = [a for a in argv if not a.startswith("--")]
    configs = [c for c in CONFIGS if not names or c[0] in names]
    peak = float(os.environ.get("ZTUNE_PEAK_TFLOPS", "989"))
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, "
          f"{'torch.compile' if compile_ else 'eager'}, SDPA flash backend, fused AdamW")
    print("%-10s %8s %6s %10s %12s %8s %10s %10s" %
          ("model", "params", "batch", "step ms", "tokens/s", "MFU", "loss[0]", "loss[end]"))
    for name, layers, channels, heads, batch in configs:
        torch.manual_seed(0)
        model = build(torch, layers, channels, heads).to(dev)
        params = sum(p.numel() for p in model.parameters())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
        fwd = torch.compile(model) if compile_ else model
        gen = torch.Generator(device=dev).manual_seed(1)
        ids = torch.randint(0, VOCAB, (batch, SEQ), device=dev, generator=gen)
        targets = torch.randint(0, VOCAB, (batch, SEQ), device=dev, generator=gen)

        def step():
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION), torch.autocast("cuda", dtype=torch.bfloat16):
                loss = fwd(ids, targets)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss

        first = step().item()
        for _ in range(WARMUP - 1):
            step()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(STEPS):
            loss = step()
        end.record()
        torch.cuda.synchronize()
        sec = start.elapsed_time(end) / 1e3 / STEPS
        last = loss.item()
        tokens = batch * SEQ
        mfu = model_flops(batch, layers, channels) / sec / (peak * 1e12)
        print("%-10s %7.0fM %6d %10.1f %12.0f %7.1f%% %10.4f %10.4f%s" %
              (name, params / 1e6, batch, sec * 1e3, tokens / sec, 100 * mfu, first, last,
               "" if math.isfinite(last) else "  (NOT FINITE)"))
        del model, opt, fwd
        torch.cuda.empty_cache()
    print("MFU against %.0f TFLOP/s dense bf16 (ZTUNE_PEAK_TFLOPS to change)" % peak)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
