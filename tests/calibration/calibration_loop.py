"""The calibration loop on this machine, end to end (issue 8, deliverable 4).

1. `ztune calibrate --quick` measures the CPU ranks (microbenchmarks only).
2. Training plans of the tiny model run on 2 CPU ranks through `ztune run`,
   each twice, interleaved (so a change in the machine's load hits all plans
   alike); the measured iteration time of a plan is the mean of its two medians.
3. `ztune calibrate --measurements ... --records <fit plans>` refits the
   profile to the microbenchmarks and the fit plans' run records.
4. Held-out plans (never shown to the fit) are predicted with `ztune predict`
   under the catalog profile (before) and the fitted profile (after), both on
   the catalog cluster: the fitted profile carries what it measured.

A fit `calibrate` refuses (issue 21: noisy, worse on held-out runs, or far
off the prior on a reference plan) must write nothing; the held-out error is
then the catalog profile's. Refused as too noisy, the target cannot be judged:
exit 77 (skipped), as for the runs' own repeatability.

Oracle: the measured times. Checks: held-out mean |error| after <= 15% and
not above the error before (by more than the machine's repeatability); with --memory: every plan's predicted peak memory per
rank within 10% of the executor's measured peak.

The two runs of a plan also measure the machine's own repeatability. When it
is worse than 10% (other jobs sharing the cores), or any one plan's two runs
differ by more than the 15% target itself, or other processes took the CPU
during a run (`ztune run --json`'s contention: a steady load repeats well and is
slow all the same), the target cannot be judged: the test says so and exits 77
(skipped, never passed). ZTUNE_NOISE_GATE set judges anyway.

usage: calibration_loop.py ZTUNE [--memory]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ZTUNE = sys.argv[1]
CHECK_MEMORY = "--memory" in sys.argv
MODEL = json.load(open(os.path.join(os.environ["ZTUNE_DATA_DIR"], "models", "tiny.json")))
NOISE_GATE = float(os.environ.get("ZTUNE_NOISE_GATE", "0.10"))  # override to judge anyway
TARGET_TIME = 0.15
TARGET_MEMORY = 0.10


def plan(dp=1, tp=1, pp=1, zero=0, mb=2, ga=4, sp=False, recompute="none", schedule="1f1b"):
    return {"schema": "ztune.plan/1", "dp": dp, "tp": tp, "pp": pp, "virtual_stages": 1,
            "sequence_parallel": sp, "zero_stage": zero, "offload": {"optimizer": "none", "params": "none"},
            "micro_batch": mb, "grad_accum": ga, "global_batch": mb * ga * dp, "recompute": recompute,
            "precision": "fp32", "schedule": schedule,
            "communication": {"overlap_comm": True, "reduce_bucket_elems": 5e8, "allgather_bucket_elems": 5e8,
                              "prefetch_bucket_elems": 5e7, "max_live_params": 1e9,
                              "param_persistence_threshold": 0.0},
            "onebit_adam": {"enabled": False, "freeze_step": 0},
            "sparse_attention": {"layout": "none", "block": 64}, "zeropp": False}


# Both sets cover the three 2-rank layouts; the held-out plans differ in
# micro-batch, accumulation, ZeRO stage, recomputation or sequence parallelism.
FIT = {"dp2_z0_mb2": plan(dp=2, mb=2, ga=4), "dp2_z1_mb4": plan(dp=2, zero=1, mb=4, ga=2),
       "dp2_z2_full": plan(dp=2, zero=2, mb=8, ga=1, recompute="full"), "tp2_mb4": plan(tp=2, mb=4, ga=4),
       "pp2_mb2": plan(pp=2, mb=2, ga=8)}
HELD = {"dp2_z0_mb4_sel": plan(dp=2, mb=4, ga=2, recompute="selective"), "dp2_z1_mb1": plan(dp=2, zero=1, mb=1, ga=8),
        "tp2_sp_mb2": plan(tp=2, sp=True, mb=2, ga=8), "pp2_mb4": plan(pp=2, mb=4, ga=4)}


def run(args, timeout=600, ok=(0,)):
    r = subprocess.run([ZTUNE] + args, capture_output=True, text=True, timeout=timeout, env=ENV)
    if r.returncode not in ok:
        print("FAILED:", " ".join(args), "\n", r.stdout[-3000:], r.stderr[-3000:])
        sys.exit(1)
    run.rc = r.returncode
    return r.stdout


def predict(cluster, name, profile=None):
    args = ["predict", "--cluster", cluster, "--model", "tiny", "--plan", f"{D}/{name}.plan.json", "--json"]
    if profile:
        args += ["--profile", profile]
    return json.loads(run(args))


with tempfile.TemporaryDirectory() as D:
    ENV = dict(os.environ, XDG_DATA_HOME=D)
    t0 = time.time()
    # The microbenchmarks only: their profile may be refused (a busy machine,
    # issue 21), the measurements are kept either way.
    run(["calibrate", "--cluster", "local-cpu", "--np", "2", "--quick", "--no-db", "--out", f"{D}/micro.json",
         "--keep-measurements", f"{D}/measurements.json"], ok=(0, 1))
    print(f"microbenchmarks: {time.time() - t0:.1f} s")

    for name, p in {**FIT, **HELD}.items():
        with open(f"{D}/{name}.plan.json", "w") as f:
            json.dump({"schema": "ztune.planfile/1", "plan": p, "model": MODEL}, f)
    measured, peaks, contended = {}, {}, {}
    for rnd in (1, 2):
        for name in list(FIT) + list(HELD):
            rec = f"{D}/{name}.{rnd}.json"
            summary = json.loads(run(["run", f"{D}/{name}.plan.json", "--steps", "6", "--no-db", "--record", rec,
                                      "--json"]))
            if summary.get("contention") and summary["contention"]["problem"]:
                contended[f"{name} (run {rnd})"] = summary["contention"]["problem"]
            r = json.load(open(rec))
            measured.setdefault(name, []).append(r["step_time_s"])
            peaks[name] = max(r["peak_memory_bytes"])
    spread = {n: abs(t[0] - t[1]) / statistics.mean(t) for n, t in measured.items()}
    noise = statistics.median(spread.values())
    for n, t in measured.items():
        print(f"  {n:16s} measured {t[0]:.4f} s, {t[1]:.4f} s (spread {100 * spread[n]:.0f}%)")
    print(f"repeatability: median spread {100 * noise:.1f}% (gate {100 * NOISE_GATE:.0f}%)")

    failures = []
    if CHECK_MEMORY:
        for name in list(FIT) + list(HELD):
            pred = predict("local-cpu", name)["memory"]["gpu"]["total_bytes"]
            err = (pred - peaks[name]) / peaks[name]
            print(f"  memory {name:16s} measured {peaks[name] / 2**20:8.2f} MiB predicted {pred / 2**20:8.2f} MiB "
                  f"error {100 * err:+.1f}%")
            if abs(err) > TARGET_MEMORY:
                failures.append(f"{name}: peak memory error {100 * err:+.1f}% exceeds {100 * TARGET_MEMORY:.0f}%")
    else:
        # A steady load repeats well and is slow all the same (a build on both
        # cores beside a clean-clone run: 2 % spread, every run twice the
        # catalog profile's time, the fit refused as too far from it).
        if contended and "ZTUNE_NOISE_GATE" not in os.environ:
            first = next(iter(contended.items()))
            print(f"SKIPPED: {len(contended)} of the runs shared the machine ({first[0]}: {first[1]}); the time target "
                  f"cannot be judged on them here")
            sys.exit(77)
        if noise > NOISE_GATE:
            print(f"SKIPPED: this machine repeats a measurement only within {100 * noise:.0f}% (other jobs share "
                  f"its cores); a {100 * TARGET_TIME:.0f}% prediction target cannot be judged here")
            sys.exit(77)
        # A plan whose two runs differ by more than the target itself: the fit
        # learns from (or is judged on) a time known only to worse than the
        # target (a clean-clone run: 7 % median, two fitted plans at 20-23 %, a
        # held-out one at 33 %, held-out error 17 %).
        unrepeatable = {n: s for n, s in spread.items() if s > TARGET_TIME}
        if unrepeatable and "ZTUNE_NOISE_GATE" not in os.environ:
            named = ", ".join(f"{n} {100 * s:.0f}%" for n, s in unrepeatable.items())
            print(f"SKIPPED: runs repeated only within more than the {100 * TARGET_TIME:.0f}% target ({named}): "
                  f"the target cannot be judged on them here")
            sys.exit(77)
        fit_records = [f"{D}/{n}.{r}.json" for n in FIT for r in (1, 2)]
        out = json.loads(run(["calibrate", "--cluster", "local-cpu", "--measurements", f"{D}/measurements.json",
                              "--no-db", "--out", f"{D}/fitted.json", "--json", "--records"] + fit_records, ok=(0, 1)))
        # A refused fit (exit 1) writes nothing: the profile in place (the
        # catalog's) stays, and "after" is "before".
        refused = run.rc == 1
        if refused:
            print("calibrate refused the fit:", "; ".join(out["verdict"]["reasons"]))
            if os.path.exists(f"{D}/fitted.json"):
                print("FAILED: a refused fit was written")
                sys.exit(1)
            if any("too noisy" in r for r in out["verdict"]["reasons"]):
                # The microbenchmarks themselves were too noisy to fit: the
                # target cannot be judged here (reported as skipped).
                print("SKIPPED: calibrate found the microbenchmarks too noisy to fit on this machine now")
                sys.exit(77)
        fitted = {} if refused else json.load(open(f"{D}/fitted.json"))
        if not refused and "measured" not in fitted:
            failures.append("the fitted profile carries no measured figures")
        elif not refused:
            print("measured figures in the profile:", json.dumps(fitted["measured"]))
        print(f"fit: mean |error| on fitted runs before {100 * out['mean_abs_error']['fitted']['before']:.1f}%, "
              f"after {100 * out['mean_abs_error']['fitted']['after']:.1f}%")
        before, after = [], []
        for name in HELD:
            m = statistics.mean(measured[name])
            b = predict("local-cpu", name)["time"]["iteration_s"]
            # The catalog cluster and --profile alone: the fitted profile carries
            # the figures it measured (no calibrated cluster file needed).
            a = b if refused else predict("local-cpu", name, f"{D}/fitted.json")["time"]["iteration_s"]
            before.append(abs(b - m) / m)
            after.append(abs(a - m) / m)
            print(f"  held-out {name:16s} measured {m:.4f} s  before {b:.4f} s ({100 * (b - m) / m:+.1f}%)  "
                  f"after {a:.4f} s ({100 * (a - m) / m:+.1f}%)")
        mb, ma = statistics.mean(before), statistics.mean(after)
        print(f"held-out mean |error|: before {100 * mb:.1f}%, after {100 * ma:.1f}% (target <= {100 * TARGET_TIME:.0f}%)")
        # The catalog cpu.json/local-cpu were themselves measured on a 2-core
        # VM like CI's, so "before" can already be close; the fit must then
        # not make it worse by more than the machine's own repeatability.
        if not ma < mb + noise:
            failures.append(f"the fit raised the held-out error ({100 * mb:.1f}% -> {100 * ma:.1f}%, more than the "
                            f"{100 * noise:.1f}% repeatability)")
        if ma > TARGET_TIME:
            failures.append(f"held-out error after the fit {100 * ma:.1f}% exceeds {100 * TARGET_TIME:.0f}%")
    print(f"total {time.time() - t0:.1f} s")
    for f in failures:
        print("FAILED:", f)
    sys.exit(1 if failures else 0)
