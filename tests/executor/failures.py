"""Bad input and interruption, end to end through mpirun and ztune-worker:
 - a plan for another world size, an unsupported option, a missing token file, a
   corrupt checkpoint shard, a checkpoint of another plan: exit code 2, the reason
   printed once by rank 0, every rank gone (the run ends within its timeout);
 - resume: a run killed with SIGKILL after committing step 3's checkpoint and then
   resumed gives bit-identical losses for steps 4 and 5 to the uninterrupted run.

usage: failures.py WORKER "MPIRUN ARGS"
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import plans  # noqa: E402

failures = 0
passed = 0


def check(name, ok, detail=""):
    global failures, passed
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f"\n{detail}"))
    if ok:
        passed += 1
    else:
        failures += 1


def main():
    worker, mpirun = sys.argv[1], sys.argv[2].split()
    model = json.load(open(os.path.join(os.environ.get("ZTUNE_DATA_DIR", "data"), "models", "tiny.json")))

    def run(np_, plan, *args):
        cmd = mpirun + ["-np", str(np_), worker, plan] + list(args)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    with tempfile.TemporaryDirectory() as d:
        dp2 = os.path.join(d, "dp2.json")
        plans.write_plan_file(dp2, model, dp=2, mb=2, ga=2, zero=1)
        r = run(3, dp2, "--steps", "1")
        check("plan for 2 ranks on 3 is refused", r.returncode == 2 and
              "but the job has 3 (ztune run --np 2, mpirun -np 2)" in r.stderr and r.stderr.count("error:") == 1, r.stderr)
        # bf16 trains on the CPU backend (16-bit storage, fp32 masters), but
        # not with 1-bit Adam, whose momentum exchange the executor runs in fp32.
        bf16 = os.path.join(d, "bf16_onebit.json")
        plans.write_plan_file(bf16, model, precision="bf16", dp=2, mb=2, ga=2)
        with open(bf16) as f:
            doc = json.load(f)
        doc["plan"]["onebit_adam"] = {"enabled": True, "freeze_step": 2}
        with open(bf16, "w") as f:
            json.dump(doc, f)
        r = run(2, bf16, "--steps", "1")
        check("bf16 plan with 1-bit Adam is refused", r.returncode == 2 and "$.plan.precision" in r.stderr
              and "1-bit Adam" in r.stderr and r.stderr.count("error:") == 1, r.stderr)
        # A rule of the plan itself, not of the executor: DeepSpeed offloads
        # optimizer states to NVMe only with ZeRO-3 (check_plan), and the worker
        # holds a plan file to it as `ztune run` does.
        nvme_z2 = os.path.join(d, "nvme_z2.json")
        plans.write_plan_file(nvme_z2, model, dp=2, mb=2, ga=2, zero=2, offload="nvme")
        r = run(2, nvme_z2, "--steps", "1")
        check("NVMe optimizer offload with ZeRO-2 is refused", r.returncode == 2 and
              "nvme_z2.json: $.plan.offload.optimizer: NVMe optimizer offload needs zero_stage 3" in r.stderr and
              r.stderr.count("error:") == 1, r.stderr)
        r = run(2, dp2, "--steps", "1", "--data", os.path.join(d, "missing.bin"))
        check("missing token file", r.returncode == 2 and "missing.bin: cannot open token file" in r.stderr, r.stderr)
        fifo = os.path.join(d, "tokens.fifo")
        os.mkfifo(fifo)
        for what, path in [("a directory", d), ("a FIFO", fifo)]:
            r = run(2, dp2, "--steps", "1", "--data", path)
            check(f"a token file that is {what} is refused at once", r.returncode == 2 and
                  "not a regular file (expected a file of little-endian uint16 tokens)" in r.stderr, r.stderr)

        # Uninterrupted run, then killed-and-resumed run.
        full = os.path.join(d, "full.json")
        r = run(2, dp2, "--steps", "5", "--record", full)
        check("uninterrupted run", r.returncode == 0, r.stderr)
        ck = os.path.join(d, "ckpt")
        r = run(2, dp2, "--steps", "5", "--checkpoint-every", "1", "--checkpoint-dir", ck, "--kill-after-step", "3")
        check("run killed after step 3", r.returncode != 0 and open(os.path.join(ck, "latest")).read().strip() == "3",
              r.stderr)
        resumed = os.path.join(d, "resumed.json")
        r = run(2, dp2, "--steps", "5", "--resume", "--checkpoint-dir", ck, "--record", resumed)
        ok = r.returncode == 0
        if ok:
            a = json.load(open(full))["losses"][3:]
            b = json.load(open(resumed))["losses"]
            ok = a == b and len(b) == 2
            print(f"     steps 4-5 uninterrupted {a} resumed {b}")
        check("resume gives bit-identical losses", ok, r.stderr)

        # --keep-checkpoints 2 leaves the newest two committed steps; the run
        # resumes from the newest bit-identically.
        kept = os.path.join(d, "ckpt_kept")
        r = run(2, dp2, "--steps", "3", "--checkpoint-every", "1", "--checkpoint-dir", kept, "--keep-checkpoints", "2")
        steps = sorted(n for n in os.listdir(kept) if n.startswith("step_"))
        check("--keep-checkpoints 2 keeps the newest two steps", r.returncode == 0 and
              steps == ["step_00000002", "step_00000003"], f"{steps}\n{r.stderr}")
        r = run(2, dp2, "--steps", "5", "--resume", "--checkpoint-dir", kept, "--record", resumed)
        check("and resumes from the newest bit-identically", r.returncode == 0 and
              json.load(open(resumed))["losses"] == json.load(open(full))["losses"][3:], r.stderr)

        # A checkpoint the disk cannot take (a file-size limit on the ranks:
        # write(2) fails with EFBIG, as on a full disk) stops the run with the
        # reason; latest keeps the step before, no temporary is left, and the
        # run resumes from it bit-identically.
        ck2 = os.path.join(d, "ckpt_limited")
        shutil.copytree(ck, ck2)
        limited = mpirun + ["-np", "2", "sh", "-c", 'ulimit -f 1000; exec "$0" "$@"', worker, dp2]
        r = subprocess.run(limited + ["--steps", "5", "--resume", "--checkpoint-dir", ck2, "--checkpoint-every", "1"],
                           capture_output=True, text=True, timeout=120)
        leftovers = [f for _, _, fs in os.walk(ck2) for f in fs if ".tmp" in f]
        check("a checkpoint write that fails stops the run and keeps the committed step",
              r.returncode == 1 and ".ckpt: File too large" in r.stderr and
              open(os.path.join(ck2, "latest")).read().strip() == "3" and not leftovers,
              f"rc {r.returncode} leftovers {leftovers}\n{r.stderr}")
        # Resumed to write more checkpoints, the run frees the space first: the
        # failed write's directory and, with --keep-checkpoints 1, the steps
        # before the one it resumes from (it had kept them until its next commit,
        # so a full disk stayed full).
        ck3 = os.path.join(d, "ckpt_freed")
        shutil.copytree(ck2, ck3)
        before = sorted(n for n in os.listdir(ck3) if n.startswith("step_"))
        r = run(2, dp2, "--steps", "4", "--resume", "--checkpoint-dir", ck3, "--checkpoint-every", "10",
                "--keep-checkpoints", "1")
        after = sorted(n for n in os.listdir(ck3) if n.startswith("step_"))
        check("a resume with --keep-checkpoints 1 frees the superseded and the failed steps before training",
              r.returncode == 0 and before == ["step_00000001", "step_00000002", "step_00000003", "step_00000004"]
              and after == ["step_00000003"], f"before {before} after {after}\n{r.stderr}")
        # A latest moved back by hand (past a damaged step, as the resume's
        # message says how) leaves the whole steps above it: only a step some
        # rank's shard is missing from is a failed write.
        ck4 = os.path.join(d, "ckpt_rewound")
        shutil.copytree(ck, ck4)
        with open(os.path.join(ck4, "latest"), "w") as f:
            f.write("1\n")
        r = run(2, dp2, "--steps", "2", "--resume", "--checkpoint-dir", ck4, "--checkpoint-every", "5")
        after = sorted(n for n in os.listdir(ck4) if n.startswith("step_"))
        check("a resume from a latest moved back keeps the whole steps above it",
              r.returncode == 0 and after == ["step_00000001", "step_00000002", "step_00000003"],
              f"after {after}\n{r.stderr}")
        r = run(2, dp2, "--steps", "5", "--resume", "--checkpoint-dir", ck2, "--record", resumed)
        check("and the run resumes from it bit-identically", r.returncode == 0 and
              json.load(open(resumed))["losses"] == json.load(open(full))["losses"][3:], r.stderr)

        # Resuming asks for steps beyond the checkpoint's; a "latest" that is
        # not a step number is said as such.
        r = run(2, dp2, "--steps", "3", "--resume", "--checkpoint-dir", ck)
        check("resume to a step the checkpoint has passed is refused", r.returncode == 2 and
              "--steps 3: the checkpoint in" in r.stderr and "is after step 3 already" in r.stderr and
              "step 4" not in r.stdout, r.stderr)
        r = run(2, dp2, "--steps", "5", "--resume", "--checkpoint-dir", ck, "--seed", "99")
        check("resume with another synthetic seed is refused", r.returncode == 2 and
              "were written reading synthetic (seed 1234); this run reads synthetic (seed 99)" in r.stderr, r.stderr)
        # With DIR/data removed any seed had resumed: the plan kept beside the
        # checkpoints says they were written with it.
        data_file = os.path.join(ck, "data")
        os.rename(data_file, data_file + ".keep")
        r = run(2, dp2, "--steps", "5", "--resume", "--checkpoint-dir", ck, "--seed", "99")
        check("resume with DIR/data removed is refused, not trained on another seed", r.returncode == 2 and
              "data: missing, though the checkpoints beside it were written with it" in r.stderr and
              "step 4" not in r.stdout, r.stderr)
        os.rename(data_file + ".keep", data_file)
        latest = os.path.join(ck, "latest")
        open(latest, "w").write("abc\n")
        r = run(2, dp2, "--steps", "5", "--resume", "--checkpoint-dir", ck)
        check("a latest file that is not a step number is refused", r.returncode == 2 and
              "latest: expected the committed checkpoint's step number (1 or more), got \"abc\"" in r.stderr, r.stderr)
        open(latest, "w").write("7\n")
        r = run(2, dp2, "--steps", "9", "--resume", "--checkpoint-dir", ck)
        check("a latest naming a step that is not there is said", r.returncode == 2 and
              "latest: names step 7, but" in r.stderr and "is not there" in r.stderr, r.stderr)
        open(latest, "w").write("3\n")
        # A FIFO in a shard's place (or in latest's) is refused, not opened: opening one blocks.
        shard1 = os.path.join(ck, "step_00000003", "rank_00001.ckpt")
        os.rename(shard1, shard1 + ".keep")
        os.mkfifo(shard1)
        r = run(2, dp2, "--steps", "5", "--resume", "--checkpoint-dir", ck)
        check("a FIFO as a shard is refused at once", r.returncode == 2 and
              "rank_00001.ckpt: not a regular file (expected a checkpoint shard)" in r.stderr, r.stderr)
        os.remove(shard1)
        os.rename(shard1 + ".keep", shard1)
        # A fresh run does not write over another run's committed checkpoints.
        r = run(2, dp2, "--steps", "1", "--checkpoint-every", "1", "--checkpoint-dir", ck)
        check("a fresh run into a directory of committed checkpoints is refused", r.returncode == 2 and
              "already holds a run's committed checkpoints" in r.stderr and
              open(latest).read().strip() == "3", r.stderr)

        # Files and directories the run needs are checked before it trains,
        # not found wrong after the work (or aborting inside it).
        for flag, path, what, says in [("--save", d, "a directory", "is a directory; expected a file to write"),
                                       ("--dump-grads", os.path.join(dp2, "g.st"), "under a file",
                                        "dp2.json is not a directory"),
                                       ("--init-from", d, "a directory", "not a regular file"),
                                       ("--nvme-dir", dp2, "a file", "not a directory")]:
            r = run(2, dp2, "--steps", "1", flag, path)
            check(f"{flag} {what} is refused before training", r.returncode == 2 and
                  says in r.stderr and "step 1" not in r.stdout and r.stderr.count("error:") == 1, r.stderr)
        for flag, value in [("--lr", "nan"), ("--lr", "-1"), ("--weight-decay", "inf"), ("--grad-clip", "-1"),
                            ("--seed", "-1"), ("--threads", "100000"), ("--steps", "2147483648")]:
            r = run(2, dp2, flag, value)
            check(f"{flag} {value} is refused", r.returncode == 2 and f"{flag}: expected" in r.stderr, r.stderr)
        # A run that diverges stops at the first non-finite loss (all ranks:
        # the loss is all-reduced) instead of recording NaNs with exit 0.
        r = run(2, dp2, "--steps", "4", "--lr", "1e30")
        check("a diverging run stops with exit 1 at its first NaN loss", r.returncode == 1 and
              "step 2: the loss is" in r.stderr and "training diverged" in r.stderr and "step 3" not in r.stdout,
              r.stdout + r.stderr)

        other = os.path.join(d, "other.json")
        plans.write_plan_file(other, model, dp=2, mb=2, ga=2, zero=0)
        r = run(2, other, "--steps", "5", "--resume", "--checkpoint-dir", ck)
        check("checkpoint of another plan is refused, naming the plan that wrote it", r.returncode == 2 and
              "written by another plan or model (plan file digest" in r.stderr and
              os.path.join(ck, "plan.json") in r.stderr, r.stderr)
        dp4 = os.path.join(d, "dp4.json")
        plans.write_plan_file(dp4, model, dp=4, mb=2, ga=1, zero=1)
        r = run(4, dp4, "--steps", "5", "--resume", "--checkpoint-dir", ck)
        check("a checkpoint of 2 ranks resumed on 4 says so", r.returncode == 2 and
              "written by a job of 2 ranks; this one has 4" in r.stderr, r.stderr)

        # Two runs given one checkpoint directory at once: the second is
        # refused (rank 0's flock on DIR/lock); it had overwritten the first's steps.
        busy = os.path.join(d, "ckpt_busy")
        first = subprocess.Popen(mpirun + ["-np", "2", worker, dp2, "--steps", "100000", "--checkpoint-every", "1",
                                           "--checkpoint-dir", busy], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.time() + 60
            while not os.path.exists(os.path.join(busy, "latest")) and time.time() < deadline:
                time.sleep(0.1)
            r = run(2, dp2, "--steps", "3", "--resume", "--checkpoint-dir", busy)
            check("a checkpoint directory in use by another run is refused", r.returncode == 2 and
                  f"--checkpoint-dir {busy}: in use by another run (pid" in r.stderr, r.stderr)
        finally:
            first.terminate()  # mpirun forwards SIGTERM to its ranks
            first.wait(timeout=60)

        # A rank that stops (SIGSTOP: a hang, a swapped-out host) ends the job
        # within --collective-timeout, its peer naming the operation and group;
        # the job had spun forever with no word.
        marker = os.path.join(d, "stopped_rank.json")
        job = subprocess.Popen(mpirun + ["-np", "2", worker, dp2, "--steps", "100000", "--collective-timeout", "2",
                                         "--record", marker], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
        try:
            rank1 = None
            deadline = time.time() + 60
            while rank1 is None and time.time() < deadline:
                time.sleep(0.2)
                for pid in os.listdir("/proc"):
                    try:
                        cmd = open(f"/proc/{pid}/cmdline", "rb").read()
                        env = open(f"/proc/{pid}/environ", "rb").read()
                    except (OSError, ValueError):
                        continue
                    if marker.encode() in cmd and b"OMPI_COMM_WORLD_RANK=1\0" in env:
                        rank1 = int(pid)
            time.sleep(1)  # training
            os.kill(rank1, signal.SIGSTOP)
            stopped = time.time()
            err = job.communicate(timeout=60)[1]
            took = time.time() - stopped
            check("a stopped rank ends the job within the collective timeout, naming the wait",
                  job.returncode != 0 and took < 20 and "of group " in err and
                  "waited more than 2 s for its peers (--collective-timeout)" in err, f"{took:.1f} s\n{err}")
        finally:
            if job.poll() is None:
                job.kill()
                job.wait(timeout=60)

        # Ranks started with different jobs (each host its own copy of the
        # flags and files): refused by rank 0 naming the difference, where
        # they had deadlocked (--steps) or trained on mixed settings (--seed).
        def mpmd(args0, args1):
            cmd = mpirun + ["-np", "1", worker, dp2] + args0 + [":", "-np", "1", worker, dp2] + args1
            return subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        for what, a0, a1, said in [
                ("--steps", ["--steps", "5"], ["--steps", "6"], "--steps is 5 on rank 0 but 6 on rank 1"),
                ("--seed", ["--steps", "2", "--seed", "1"], ["--steps", "2", "--seed", "2"],
                 "--data is synthetic (seed 1) on rank 0 but synthetic (seed 2) on rank 1"),
                ("a flag", ["--steps", "2"], ["--steps", "2", "--lr", "x"], "rank 1: --lr: ")]:
            r = mpmd(a0, a1)
            check(f"ranks started with different {what} are refused", r.returncode == 2 and said in r.stderr and
                  "step 1" not in r.stdout, r.stdout + r.stderr)

        # One byte appended to rank 0's shard of step 3 (the issue 20 finding: accepted before).
        shard0 = os.path.join(ck, "step_00000003", "rank_00000.ckpt")
        intact = open(shard0, "rb").read()
        open(shard0, "ab").write(b"\0")
        r = run(2, dp2, "--steps", "5", "--resume", "--checkpoint-dir", ck)
        check("a shard with a byte appended is refused", r.returncode == 2 and "rank_00000.ckpt" in r.stderr and
              "bytes after the checksum" in r.stderr, r.stderr)
        open(shard0, "wb").write(intact)

        shard = os.path.join(ck, "step_00000003", "rank_00001.ckpt")
        data = bytearray(open(shard, "rb").read())
        data[len(data) // 2] ^= 0xFF
        open(shard, "wb").write(bytes(data))
        r = run(2, dp2, "--steps", "5", "--resume", "--checkpoint-dir", ck)
        check("corrupt shard is refused by rank 0 naming rank 1", r.returncode == 2 and
              "rank 1:" in r.stderr and "corrupt (checksum mismatch)" in r.stderr, r.stderr)
    print(f"{passed} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
