#!/usr/bin/env python3
"""The analytical cost model against the discrete-event simulator, over whole
plan spaces: every feasible plan of a search is timed by both (--simulate-top
covering the space), and the relative difference analytical/simulated − 1 is
summarised by plan group. No published run measures these plans (offload,
ZeRO-3 beside tensor parallelism), so the two estimators are each other's check:
where they disagree, one of them models something the other does not.

Usage: bench/estimator_agreement.py [path/to/ztune]   (default build/release/cli/ztune)
Prints one row per (model, group): plans, mean, mean |·|, max |·| in percent.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZTUNE = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build/release/cli/ztune")

# Korthikanti et al. 2022 Table 3 shapes (sequence 2048, vocabulary 51200) on
# DGX A100 80GB nodes: (name, layers, hidden, heads, GPUs, global batch).
CASES = [
    ("22B", 48, 6144, 64, 8, 4),
    ("13B", 40, 5120, 40, 16, 64),
    ("175B", 96, 12288, 96, 64, 64),
]


def group(plan):
    if plan["offload"]["optimizer"] != "none" or plan["offload"]["params"] != "none":
        return "offload"
    if plan["tp"] > 1 and plan["dp"] > 1:
        return "tp>1, dp>1, ZeRO %d" % plan["zero_stage"]
    return "other"


def main():
    with open(os.path.join(ROOT, "data/models/gpt3-175b.json")) as f:
        base_model = json.load(f)
    with open(os.path.join(ROOT, "data/clusters/dgx-a100-80gb.json")) as f:
        base_cluster = json.load(f)
    print("%-5s %-20s %6s %8s %9s %9s" % ("model", "group", "plans", "mean %", "mean|.| %", "max|.| %"))
    with tempfile.TemporaryDirectory() as tmp:
        for name, layers, hidden, heads, gpus, batch in CASES:
            model = dict(base_model, name="korthikanti-" + name, layers=layers, hidden=hidden, heads=heads,
                         kv_heads=heads, ffn_hidden=4 * hidden, seq_len=2048, vocab=51200, global_batch=batch)
            cluster = dict(base_cluster, nodes=gpus // base_cluster["node"]["gpus"])
            mpath, cpath = os.path.join(tmp, "m.json"), os.path.join(tmp, "c.json")
            with open(mpath, "w") as f:
                json.dump(model, f)
            with open(cpath, "w") as f:
                json.dump(cluster, f)
            out = subprocess.run([ZTUNE, "search", "--cluster", cpath, "--model", mpath, "--attention", "standard",
                                  "--top", "1000000", "--simulate-top", "1000000", "--db",
                                  os.path.join(tmp, "r.db"), "--json"], check=True, capture_output=True, text=True)
            groups = {}
            for p in json.loads(out.stdout)["plans"]:
                a = p["prediction"]["time"]["iteration_s"]
                s = p["prediction"]["simulated"]["iteration_s"]
                groups.setdefault(group(p["plan"]), []).append((a / s - 1) * 100)
            for g in sorted(groups):
                v = groups[g]
                print("%-5s %-20s %6d %8.2f %9.2f %9.2f" % (name, g, len(v), statistics.mean(v),
                                                          statistics.mean(map(abs, v)), max(map(abs, v))))


if __name__ == "__main__":
    main()
