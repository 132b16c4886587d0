"""The joint fit recovers known parameters from synthetic runs (issue 18).

Oracle: a parameter set chosen here (the truth). Every published FSDP run on
A100 and H100 of data/validation is re-measured synthetically: its throughput
becomes what `ztune validate` predicts with the truth. The fit of
data/validation/fit_profiles.py then starts from its shipped starting values
(fit_start/), which differ from the truth, and must come back to the truth:
each parameter within 6 % (the search ends at steps of exp(0.005)), and the
synthetic runs reproduced to 1 % MAPE.

usage: fit_recovery.py ZTUNE
"""
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "data")
sys.path.insert(0, os.path.join(DATA, "validation"))
import fit_profiles as fp  # noqa: E402

ZTUNE = sys.argv[1]
SOURCES = ["torchtitan-H100", "torchtitan-A100", "PyTorch-FSDP-blog", "fms-fsdp", "TinyLlama"]
# (parameter, truth): H100's large-GEMM ceiling, the FSDP engine's elementwise
# traffic and the share of its ZeRO-3 gathers that prefetch hides. Starting
# values: 0.70, 2.0, 0.8. (A per-step host overhead of tens of ms is not among
# them: on these multi-second steps the runs do not determine it to 6 %.)
TRUTH = [(("P", "h100", "gemm", "efficiency_by_flops", 0, 1), 0.80),
         (("E", "fsdp", "fusion", "elementwise_traffic"), 1.4),
         (("E", "fsdp", "overlap", "zero3_prefetch"), 0.5)]
BOUNDS = {("P", "h100", "gemm", "efficiency_by_flops", 0, 1): (0.3, 0.95),
          ("E", "fsdp", "fusion", "elementwise_traffic"): (1.0, 4.0),
          ("E", "fsdp", "overlap", "zero3_prefetch"): (0.0, 1.0)}


class SyntheticEvaluator(fp.Evaluator):
    """fit_profiles' evaluator on a scratch data directory whose validation
    directory holds only SOURCES, with the synthetic measurements."""

    def __init__(self, ztune, rows_by_file):
        self.ztune = ztune
        self.root = tempfile.mkdtemp(prefix="ztune-recovery-")
        for d in os.listdir(DATA):
            if d not in ("profiles", "engines", "validation"):
                os.symlink(os.path.join(DATA, d), os.path.join(self.root, d))
        shutil.copytree(os.path.join(DATA, "profiles"), os.path.join(self.root, "profiles"))
        os.makedirs(os.path.join(self.root, "engines"))
        val = os.path.join(self.root, "validation")
        os.makedirs(val)
        os.symlink(os.path.join(DATA, "validation", "clusters"), os.path.join(val, "clusters"))
        spec = json.load(open(os.path.join(DATA, "validation", "validation.json")))
        spec["sources"] = [s for s in spec["sources"] if s["name"] in SOURCES]
        json.dump(spec, open(os.path.join(val, "validation.json"), "w"))
        for name, rows in rows_by_file.items():
            json.dump(rows, open(os.path.join(val, name), "w"))
        self.calls = 0


def main():
    start = fp.load_state(os.path.join(DATA, "validation", "fit_start"))
    truth = copy.deepcopy(start)
    for path, v in TRUTH:
        fp.put(truth, path, v)
    assert fp.monotone(truth)
    spec = json.load(open(os.path.join(DATA, "validation", "validation.json")))
    files = {s["file"] for s in spec["sources"] if s["name"] in SOURCES}
    rows = {f: json.load(open(os.path.join(DATA, "validation", f))) for f in files}

    # 1. Predict every run with the truth (published values are ignored).
    ev = SyntheticEvaluator(ZTUNE, rows)
    try:
        rep = ev.report(copy.deepcopy(truth))
        assert rep is not None, "ztune validate failed on the synthetic directory"
        predicted = {c["id"]: c["predicted"] for c in rep["cases"]}
    finally:
        ev.close()
    assert len(predicted) >= 20, f"only {len(predicted)} FSDP runs predicted"
    # 2. The synthetic measurements: each predicted run's throughput is the truth's.
    for f, rs in rows.items():
        for r in rs:
            if r["id"] in predicted:
                r["measured"] = {"tokens_per_s_per_gpu": predicted[r["id"]]}
    # 3. Fit from the starting values and compare.
    ev = SyntheticEvaluator(ZTUNE, rows)
    try:
        params = [(path, *BOUNDS[path]) for path, _ in TRUTH]
        before = fp.cost(ev.report(copy.deepcopy(start)))
        state, after = fp.fit(ev, copy.deepcopy(start), 30, log=False, params=params, min_step=0.005)
        rep = ev.report(copy.deepcopy(state))
        mape, _, _ = fp.summary(rep)
    finally:
        ev.close()
    ok = True
    print(f"{len(predicted)} synthetic runs; objective {before:.4f} -> {after:.6f}; MAPE after the fit {mape:.3f} %")
    for path, v in TRUTH:
        got = fp.get(state, path)
        err = abs(got - v) / v
        mark = "ok" if err <= 0.06 else "FAIL"
        ok = ok and err <= 0.06
        print(f"  {'/'.join(str(k) for k in path):55s} start {fp.get(start, path):8.3f}  truth {v:8.3f}  "
              f"fitted {got:8.3f}  ({100 * err:.1f} %) {mark}")
    if mape > 1.0:
        print(f"FAIL: the fit reproduces the synthetic runs to {mape:.2f} % MAPE (expected <= 1 %)")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
