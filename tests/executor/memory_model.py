"""The memory model against the executor's measured peak, plan by plan.

Each case is a plan of the equivalence test (equivalence.CASES: the same
keywords, the tiny models), run for 2 steps by `ztune run` on local-cpu, in fp32
and bf16 storage. The oracle is the run's own peak: the memory tracker counts
every byte the executor allocates (MemoryTracker, exact on CPU ranks), and
`ztune run` sets it beside `ztune predict`'s total for the same plan. The model
must land within 5 %: over the 73 equivalence plans it measured -2.5 % to
+1.4 % (fp32) and -1.8 % to +2.4 % (bf16) once it counted the backward's
temporaries, the pipeline's unmatched sends and each stage's output
(docs/benchmarks.md, session 31); before, -11.6 % to +3.8 %.

The cases cover each phase the model takes a peak from: a layer's backward
(the MLP's dg and dfc), the loss's backward (dlogits beside the logits),
ZeRO-2/3's buckets (the one filling, the reduce-scattered pieces), ZeRO-3's
gathered weights, GPipe's logits of every micro-batch, the pipeline's buffers,
the context-parallel ring's fp32 blocks, the optimizer step's workspace.

usage: memory_model.py ZTUNE
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import equivalence  # noqa: E402
import plans  # noqa: E402

TOLERANCE = 0.05
# Plans of their own on a wider tiny model (hidden 128, 8 layers), where full
# recomputation leaves the activations small beside the model states: the
# optimizer step's and initialisation's workspaces had set the prediction
# 8-17 % over the peak before they were counted as the executor allocates
# them. (keywords of plans.plan, model overrides)
WIDE = {
    "wide_pp2_zero0_recompute_full": (dict(dp=2, pp=2, mb=1, ga=4, zero=0, bucket=1e5, recompute="full"),
                                      {"layers": 8, "hidden": 128}),
    "wide_dp2_zero3_recompute_full": (dict(dp=2, mb=1, ga=4, zero=3, bucket=1e5, recompute="full"),
                                      {"layers": 8, "hidden": 128}),
    # Long enough sequences that the state the ring and Ulysses re-run under
    # selective recomputation leads the backward's peak: before it was counted
    # these were predicted 11.8 % and 14.9 % under it (an audit's figures).
    "llama_s256_cp2_recompute_selective": (dict(model="tiny-llama", cp=2, ga=1, recompute="selective"),
                                           {"seq_len": 256}),
    "llama_s256_ulysses2_recompute_selective": (dict(model="tiny-llama", ulysses=2, ga=1, recompute="selective"),
                                                {"seq_len": 256}),
    # Megatron-Core's accounting layout with empty end chunks (Plan::chunk_layers):
    # stage 1's last chunk is empty, so its first backwards free nothing and its
    # peak comes after the warm-up (7 layers' activations, not the warm-up's 6);
    # counted by the warm-up's chunks alone, stage 0 had been named the most
    # loaded and stage 1 predicted 11 % under its measured activations.
    "pp2_v4_chunks_0_1x6_0": (dict(pp=2, v=4, schedule="interleaved", mb=1, ga=8,
                                   chunk_layers=[0, 1, 1, 1, 1, 1, 1, 0]), {"layers": 6}),
}
CASES = ["dp2_zero1", "dp2_zero2", "dp2_zero3", "dp4_zero3_small_buckets", "recompute_full",
         "recompute_selective", "pp2_1f1b", "pp2_gpipe", "pp2_interleaved_v2", "tp2_sp", "cp2", "ulysses2",
         "llama_tp2_sp_recompute_selective", "dp2_zero2_offload", "dp2_pp2_zero3_1f1b",
         "dp2_pp3_zero3_stages_1_1_2_recompute_full", "hsdp_dp4_pp2_zero3_shard2",
         # The ring's and Ulysses' state re-run by selective recomputation in the
         # backward: left out, these were predicted 9-15 % under their peak.
         "cp2_recompute_selective", "ulysses2_recompute_selective", "pp2_interleaved_chunks_1_2_2_1",
         "dp2_pp2_interleaved_chunks_1_2_2_2_zero1_flash"]


def lines_table(ztune, plan, record, err, label):
    """scripts/gpu-check/memory_lines.py, which the device check prints, on a CPU run: its tracked lines are
    the whole prediction here (no CUDA runtime), so it must give `ztune run`'s error. Its failures."""
    q = subprocess.run([ztune, "predict", "--plan", plan, "--cluster", "local-cpu", "--json"],
                       capture_output=True, text=True, timeout=120)
    if q.returncode != 0:
        return [f"{label}: ztune predict exit {q.returncode}: {q.stderr[-300:]}"]
    predicted = plan + ".predict.json"
    with open(predicted, "w") as f:
        f.write(q.stdout)
    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "gpu-check", "memory_lines.py")
    t = subprocess.run([sys.executable, script, record, predicted], capture_output=True, text=True, timeout=60)
    row = [line for line in t.stdout.splitlines() if line.strip().startswith("tracked lines")]
    print(t.stdout.rstrip())
    if t.returncode != 0 or not row:
        return [f"{label}: memory_lines.py exit {t.returncode}: {t.stderr[-300:]}"]
    shown = float(row[0].split("(")[1].rstrip("%)")) / 100
    return [] if abs(shown - err) <= 0.001 else [f"{label}: memory_lines.py says {shown:+.1%}, ztune run {err:+.1%}"]


def main():
    ztune = sys.argv[1]
    data = os.environ.get("ZTUNE_DATA_DIR", "data")
    failures = []
    with tempfile.TemporaryDirectory() as d:
        for name in CASES + list(WIDE):
            for precision in ("fp32", "bf16"):
                case, overrides = WIDE[name] if name in WIDE else (equivalence.CASES[name], {})
                kw = dict(case, precision=precision)
                if "layers" in kw:  # an equivalence case's deeper tiny model
                    overrides = dict(overrides, layers=kw.pop("layers"))
                with open(os.path.join(data, "models", kw.pop("model", "tiny") + ".json")) as f:
                    model = dict(json.load(f), **overrides)
                path = os.path.join(d, f"{name}_{precision}.json")
                plans.write_plan_file(path, model, **kw)
                record = os.path.join(d, f"{name}_{precision}.record.json")
                p = subprocess.run([ztune, "run", path, "--cluster", "local-cpu", "--steps", "2", "--no-db", "--json",
                                    "--record", record], capture_output=True, text=True, timeout=300)
                label = f"{name} {precision}"
                if p.returncode != 0:
                    failures.append(f"{label}: ztune run exit {p.returncode}: {p.stderr[-400:]}")
                    continue
                total = json.loads(p.stdout)["memory_vs_prediction"]["total"]
                err = total["error"]
                print(f"{label:44s} measured {total['measured_bytes'] / 2**20:7.3f} MiB, predicted {err:+.1%}")
                if abs(err) > TOLERANCE:
                    failures.append(f"{label}: predicted {err:+.1%} off the measured peak (within {TOLERANCE:.0%})")
                if name == "pp2_gpipe" and precision == "fp32":  # predict prices fp32 only on CPU ranks
                    failures += lines_table(ztune, path, record, err, label)
    for f in failures:
        print("FAILED:", f)
    print(f"{(len(CASES) + len(WIDE)) * 2 - len(failures)} within {TOLERANCE:.0%}, {len(failures)} not")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
