#!/usr/bin/env python3
"""`ztune calibrate` writes only a fit that earns its place (issue 21), end to
end through the CLI, on measurements synthesised in closed form (no timing, so
no noise from this machine):

1. A machine with known figures, measured with 3 % log-normal noise: the fit
   is accepted against the shipped profile and written (the held-out points
   are predicted better than the shipped profile predicts them).
2. The same measurements again, the profile fitted on all of them in place: a
   refit, judged on held-out folds, cannot predict them better than the profile
   that saw every point -> refused, exit 1, the profile in place unchanged byte
   for byte; --force writes it.
3. GEMMs 30x slower than the shipped profile's: refused, the reference plans
   named (gpt2-1.5b), nothing written.
4. --keep-measurements on a full disk: exit 2 naming the file and where the
   measurements are.

usage: refusal_cli.py ZTUNE
"""
import json
import math
import os
import random
import subprocess
import sys
import tempfile

ZTUNE = sys.argv[1]
rng = random.Random(21)


def row_timing(t, spread=0.03):
    return {"time_s": t, "time_min_s": t * 0.97, "time_max_s": t * 1.03, "iters": 20, "repeats": 5, "spread": spread,
            "wrong": 0}


def measurements(gemm_slowdown=1.0, noise=0.03):
    def jit(t):
        return t * math.exp(noise * rng.gauss(0, 1))

    peak = 30e9  # FLOP/s per rank at the largest GEMMs
    gemm = []
    d = 32.0
    while d <= 1024:
        f = 2 * d ** 3
        eff = 0.3 + 0.7 * min(1.0, max(0.0, (math.log10(f) - 5) / 4))
        t = jit(f / (peak * eff) * gemm_slowdown)
        n = int(round(d))
        gemm.append({"m": n, "n": n, "k": n, "op": "NN", "flops": float(2 * n ** 3), "gflops": f / t / 1e9,
                     **row_timing(t)})
        d *= 2 ** 0.5
    mem, copies = [], []
    n = 16384
    while n <= 4 * 1048576:
        for kernel, b, bw in (("copy", 8 * n, 40e9), ("add", 12 * n, 10e9), ("scale", 8 * n, 10e9)):
            t = jit(b / bw + 2e-6)
            mem.append({"kernel": kernel, "elements": n, "bytes": float(b), "kernels": 1, "gbps": b / t / 1e9,
                        **row_timing(t)})
        for direction in ("h2d", "d2h"):
            t = jit(4 * n / 12e9)
            copies.append({"direction": direction, "bytes": float(4 * n), "gbps": 4 * n / t / 1e9, **row_timing(t)})
        n *= 4
    coll = []
    s = 1024
    while s <= 16 * 1048576:
        for name, factor, steps in (("all_reduce", 1.0, 2), ("all_gather", 0.5, 1), ("sendrecv", 1.0, 1)):
            t = jit(8e-6 + 3e-6 * steps + s * factor / 6e9)
            coll.append({"collective": name, "group": "intra:2", "ranks": 2, "ranks_per_node": 2,
                         "crosses_nodes": False, "in_place": True, "bytes": float(s), "count": s // 4,
                         "type": "float", "algbw_gbps": s / t / 1e9, "busbw_gbps": s * factor / t / 1e9,
                         **row_timing(t)})
        s *= 4
    return {"schema": "ztune.measurements/1", "backend": "cpu", "gemm_precision": "fp32", "ranks": 2, "nodes": 1,
            "ranks_per_node": 2, "threads_per_rank": 1, "protocol": {}, "environment": {}, "wrong": 0,
            "elapsed_s": 1.0, "notes": [], "gemm": gemm, "attention": [], "memory_bound": mem, "copies": copies,
            "host_adam": None, "collectives": coll}


def calibrate(m_path, out, *extra):
    r = subprocess.run([ZTUNE, "calibrate", "--cluster", "local-cpu", "--measurements", m_path, "--no-db", "--out", out,
                        "--json", *extra], capture_output=True, text=True, env=ENV, timeout=300)
    try:
        doc = json.loads(r.stdout)
    except json.JSONDecodeError:
        print("calibrate printed no JSON:", r.stdout[-2000:], r.stderr[-2000:])
        sys.exit(1)
    return r.returncode, doc


failures = []
with tempfile.TemporaryDirectory() as D:
    ENV = dict(os.environ, XDG_DATA_HOME=D)
    good = f"{D}/good.json"
    json.dump(measurements(), open(good, "w"))
    out = f"{D}/profile.json"

    rc, doc = calibrate(good, out)
    print("1. fresh fit:", "accepted" if doc["verdict"]["accept"] else "refused", doc["verdict"]["reasons"],
          doc["verdict"]["notes"])
    if rc != 0 or not os.path.exists(out):
        failures.append(f"1: a fit better than the shipped profile on held-out points was not written (exit {rc})")
    before = open(out, "rb").read() if os.path.exists(out) else b""

    rc, doc = calibrate(good, out)
    reasons = " ".join(doc["verdict"]["reasons"])
    print("2. refit against the profile fitted on every point:", rc, reasons)
    if rc != 1 or "held-out microbenchmark points" not in reasons:
        failures.append(f"2: a refit no better on held-out points was not refused (exit {rc}: {reasons})")
    if (open(out, "rb").read() if os.path.exists(out) else b"") != before:
        failures.append("2: the profile in place was changed by a refused fit")
    rc, doc = calibrate(good, out, "--force")
    if rc != 0 or not doc["written"]:
        failures.append(f"2: --force did not write (exit {rc})")

    slow = f"{D}/slow.json"
    json.dump(measurements(gemm_slowdown=30.0), open(slow, "w"))
    far = f"{D}/far.json"
    rc, doc = calibrate(slow, far)
    reasons = " ".join(doc["verdict"]["reasons"])
    print("3. GEMMs 30x slower:", rc, reasons[:300])
    if rc != 1 or "gpt2-1.5b" not in reasons or "reference plan" not in reasons:
        failures.append(f"3: a fit 30x off on the reference plans was not refused naming them (exit {rc})")
    if os.path.exists(far):
        failures.append("3: a refused fit was written")

    # 4. --keep-measurements on a full disk (/dev/full): exit 2 naming the file and
    # where the measurements are; it had aborted on an uncaught filesystem_error.
    r = subprocess.run([ZTUNE, "calibrate", "--cluster", "local-cpu", "--measurements", good, "--no-db", "--out",
                        f"{D}/kept.json", "--keep-measurements", "/dev/full"], capture_output=True, text=True, env=ENV,
                       timeout=300)
    print("4. --keep-measurements /dev/full:", r.returncode, r.stderr.strip()[:200])
    if r.returncode != 2 or ("--keep-measurements /dev/full: cannot write the file: No space left on device "
                             f"(the measurements are at {good})") not in r.stderr:
        failures.append(f"4: a full disk under --keep-measurements was not said (exit {r.returncode}): {r.stderr}")

    # 4b. --out where nothing can be written: named by --out, the flag given
    # (its cluster file, written first, had been named --cluster-out).
    r = subprocess.run([ZTUNE, "calibrate", "--cluster", "local-cpu", "--measurements", good, "--no-db", "--out",
                        "/proc/ztune-cal.json"], capture_output=True, text=True, env=ENV, timeout=300)
    print("4b. --out /proc/ztune-cal.json:", r.returncode, r.stderr.strip()[:200])
    if r.returncode != 2 or not r.stderr.startswith("ztune: error: --out") or "--cluster-out" in r.stderr:
        failures.append(f"4b: an unwritable --out was not named by --out (exit {r.returncode}): {r.stderr}")

    # 5. CPU measurements for a GPU cluster: refused naming the backends (the fit
    # had priced a V100 profile from CPU figures, with infinities in its report).
    r = subprocess.run([ZTUNE, "calibrate", "--cluster", "dgx2x16", "--measurements", good, "--no-db", "--out",
                        f"{D}/gpu.json"], capture_output=True, text=True, env=ENV, timeout=300)
    print("5. CPU measurements for dgx2x16:", r.returncode, r.stderr.strip()[:200])
    if r.returncode != 2 or "$.backend: measured on the cpu backend, and this calibration fits the cuda" not in r.stderr:
        failures.append(f"5: CPU measurements for a GPU cluster were not refused (exit {r.returncode}): {r.stderr}")
    if os.path.exists(f"{D}/gpu.json"):
        failures.append("5: a profile was written from another backend's measurements")

    # 6. Each measurement once, and only this cluster's: a record given twice
    # (or a copy of it) had been fitted twice, a held-out record also given
    # as fitted scored itself, and a record of another cluster was fitted as
    # this one's without a word.
    rec = f"{D}/r.json"
    r = subprocess.run([ZTUNE, "run", "--cluster", "local-cpu", "--model", "tiny", "--steps", "3", "--record", rec,
                        "--no-db"], capture_output=True, text=True, env=ENV, timeout=300)
    if r.returncode != 0:
        failures.append(f"6: the run for a record failed (exit {r.returncode}): {r.stderr[-500:]}")
    else:
        copy = f"{D}/copy/r.json"
        os.makedirs(os.path.dirname(copy))
        open(copy, "w").write(open(rec).read())
        rc, doc = calibrate(good, f"{D}/twice.json", "--force", "--records", rec, copy)
        notes = " ".join(doc["verdict"]["notes"] + doc.get("notes", []))
        print("6. a record given twice:", rc, notes[:300])
        if f"{copy} is {rec} again: fitted once" not in notes:
            failures.append(f"6: a record given twice was not fitted once, said (exit {rc}): {notes}")
        rc, doc = calibrate(good, f"{D}/held.json", "--force", "--records", rec, "--holdout-records", copy)
        notes = " ".join(doc["verdict"]["notes"] + doc.get("notes", []))
        if f"{rec} is the held-out {copy} again: held out, not fitted" not in notes:
            failures.append(f"6: a held-out record's fitted copy was not left out of the fit (exit {rc}): {notes}")
        other = json.load(open(rec))
        other["plan_file"]["cluster"]["name"] = "other-cpu"
        other_path = f"{D}/other.json"
        json.dump(other, open(other_path, "w"))
        r = subprocess.run([ZTUNE, "calibrate", "--cluster", "local-cpu", "--measurements", good, "--no-db", "--out",
                            f"{D}/o.json", "--records", other_path], capture_output=True, text=True, env=ENV,
                           timeout=300)
        print("6. another cluster's record:", r.returncode, r.stderr.strip()[:200])
        if r.returncode != 2 or (f"{other_path}: $.plan_file.cluster.name: the run was measured on cluster other-cpu, "
                                 "and this calibration fits local-cpu's profile") not in r.stderr:
            failures.append(f"6: another cluster's record was not refused (exit {r.returncode}): {r.stderr}")

    # 7. A stored run measured while other work shared the machine (ztune run
    # stores machine.others_cpu_fraction beside it) is left out of the fit,
    # said: its time is a contention the cost model does not price. The
    # fraction is set by hand here (a live busy loop measured 49 % on 2 cores).
    db = f"{D}/contended.db"
    r = subprocess.run([ZTUNE, "run", "--cluster", "local-cpu", "--model", "tiny", "--steps", "3", "--db", db],
                       capture_output=True, text=True, env=ENV, timeout=300)
    if r.returncode != 0:
        failures.append(f"7: the run failed (exit {r.returncode}): {r.stderr[-500:]}")
    else:
        import sqlite3
        con = sqlite3.connect(db)
        names = [n for (n,) in con.execute("SELECT name FROM measurements WHERE run_id = 1")]
        if "machine.others_cpu_fraction" not in names:
            failures.append(f"7: ztune run stored no machine.others_cpu_fraction (measurements: {names})")
        con.execute("UPDATE measurements SET value = 0.45 WHERE run_id = 1 AND name = 'machine.others_cpu_fraction'")
        con.commit()
        con.close()
        r = subprocess.run([ZTUNE, "calibrate", "--cluster", "local-cpu", "--measurements", good, "--db", db, "--out",
                            f"{D}/c.json", "--force", "--json"], capture_output=True, text=True, env=ENV, timeout=300)
        doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
        notes = " ".join(doc.get("verdict", {}).get("notes", []) + doc.get("notes", []))
        print("7. a contended stored run:", r.returncode, notes[:200])
        if ("left out: other work shared the machine while they ran (first: run 1: other processes took 45% of this "
                "machine's CPU time during the run") not in notes:
            failures.append(f"7: a contended stored run was not left out, said (exit {r.returncode}): {notes}")

for f in failures:
    print("FAILED:", f)
sys.exit(1 if failures else 0)
