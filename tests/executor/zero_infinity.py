"""ZeRO-Infinity offload (issue 7 deliverable 5), end to end: optimizer states
to NVMe, and ZeRO-3 parameter partitions to the CPU and to NVMe.

Oracle: the same plan with the optimizer offloaded to CPU memory (itself checked
against a single rank in executor_equivalence). The NVMe path runs the same host
Adam on the same numbers, only storing master weights and moments in a file
through direct asynchronous I/O, so the losses must be bit-identical; a run
checkpointed at step 2 and resumed must continue bit-identically; the state
files live in --nvme-dir while the job runs and are gone after it.

Parameter offload: the partitions live in host memory and come up for each
gather; the arithmetic is untouched, so losses are bit-identical to the same
plan without it, and the run record shows the partitions under host_params
with no device params. On NVMe the partitions live in a file per rank (read
for each gather, written after each step): bit-identical to keeping them in
host memory, with neither params nor host_params in memory, and resumable.

usage: zero_infinity.py WORKER "MPIRUN ARGS"
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import plans  # noqa: E402

WORKER, MPIRUN = sys.argv[1], sys.argv[2].split()
MODEL = json.load(open(os.path.join(os.environ.get("ZTUNE_DATA_DIR", "data"), "models", "tiny.json")))
failures = []


def run(plan, *args):
    r = subprocess.run(MPIRUN + ["-np", "2", WORKER, plan] + list(args), capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-2000:])
    return r


def run_watching(directory, plan, *args):
    """Runs the plan while listing the .swp files that appear in `directory`."""
    seen = set()
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.update(f for f in os.listdir(directory) if f.endswith(".swp"))
            time.sleep(0.002)

    t = threading.Thread(target=watch)
    t.start()
    r = run(plan, *args)
    stop.set()
    t.join()
    return r, seen


def losses(path):
    return json.load(open(path))["losses"]


def same_losses(oracle_label, oracle_rec, label, rec, failure):
    """Prints both runs' losses; records `failure` unless they are bit-identical."""
    a, b = losses(oracle_rec), losses(rec)
    print(f"{oracle_label:26s}", " ".join(f"{x:.7f}" for x in a))
    print(f"{label:26s}", " ".join(f"{x:.7f}" for x in b))
    if a != b:
        failures.append(failure)


def check_resume(plan, steps, ckpt, nvme_dir, straight_rec, resumed_rec, what):
    """Checkpoints at step 2, resumes to `steps`: the losses must equal the straight run's."""
    r1 = run(plan, "--steps", "2", "--checkpoint-every", "2", "--checkpoint-dir", ckpt, "--nvme-dir", nvme_dir)
    r2 = run(plan, "--steps", str(steps), "--resume", "--checkpoint-dir", ckpt, "--nvme-dir", nvme_dir,
             "--record", resumed_rec)
    if r1.returncode != 0 or r2.returncode != 0:
        failures.append(f"checkpoint/resume with {what} failed")
    elif os.path.exists(straight_rec):
        resumed, straight = losses(resumed_rec), losses(straight_rec)[2:]
        print(f"{what}, resumed steps 3-{steps}:", " ".join(f"{x:.7f}" for x in resumed))
        if resumed != straight:
            failures.append(f"the resumed run with {what} differs from the straight run")


with tempfile.TemporaryDirectory() as d:
    cpu_plan, nvme_plan = f"{d}/cpu.json", f"{d}/nvme.json"
    plans.write_plan_file(cpu_plan, MODEL, dp=2, zero=3, mb=2, ga=2, offload="cpu")
    plans.write_plan_file(nvme_plan, MODEL, dp=2, zero=3, mb=2, ga=2, offload="nvme")
    nvme_dir = f"{d}/nvme"
    os.mkdir(nvme_dir)

    r = run(cpu_plan, "--steps", "6", "--record", f"{d}/cpu.rec")
    assert r.returncode == 0, "CPU offload run failed"
    # Watch the NVMe directory while the job runs: two rank files appear.
    r, seen = run_watching(nvme_dir, nvme_plan, "--steps", "6", "--record", f"{d}/nvme.rec", "--nvme-dir", nvme_dir)
    if r.returncode != 0:
        failures.append("the NVMe offload run failed")
    else:
        same_losses("cpu offload losses:", f"{d}/cpu.rec", "nvme offload losses:", f"{d}/nvme.rec",
                    "NVMe offload losses differ from CPU offload's")
        print("state files seen during the run:", sorted(seen))
        if len(seen) != 2:
            failures.append(f"expected 2 rank state files in --nvme-dir, saw {sorted(seen)}")
        if os.listdir(nvme_dir):
            failures.append(f"state files left behind: {os.listdir(nvme_dir)}")
        rec = json.load(open(f"{d}/nvme.rec"))
        host = rec["memory"][0]["by_category"]
        print("rank 0 host memory: host_optimizer", host.get("host_optimizer"), "host_staging", host.get("host_staging"))
        if host.get("host_optimizer", 0) != 0:
            failures.append("NVMe offload still holds optimizer states in host memory")
        # Whether the drive was used directly: the oracle is this script opening
        # a file in the same directory with O_DIRECT itself.
        probe = os.path.join(nvme_dir, "probe")
        try:
            os.close(os.open(probe, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600))
            expected_io = "direct"
        except OSError:
            expected_io = "buffered"
        finally:
            if os.path.exists(probe):
                os.remove(probe)
        print(f"NVMe I/O in the run record: {rec.get('nvme_io')} (O_DIRECT probe of --nvme-dir: {expected_io})")
        if rec.get("nvme_io") != expected_io:
            failures.append(f"run record says NVMe I/O {rec.get('nvme_io')}, the directory gives {expected_io}")

    # Checkpoint at step 2, resume to step 6: the same losses as the straight run.
    check_resume(nvme_plan, 6, f"{d}/ckpt", nvme_dir, f"{d}/nvme.rec", f"{d}/resumed.rec", "NVMe optimizer states")

    # Parameter offload to the CPU against the same ZeRO-3 plan without it.
    base_plan, par_plan = f"{d}/z3.json", f"{d}/z3par.json"
    plans.write_plan_file(base_plan, MODEL, dp=2, zero=3, mb=2, ga=2)
    plans.write_plan_file(par_plan, MODEL, dp=2, zero=3, mb=2, ga=2, offload_params="cpu")
    rb = run(base_plan, "--steps", "4", "--record", f"{d}/z3.rec")
    rp = run(par_plan, "--steps", "4", "--record", f"{d}/z3par.rec")
    if rb.returncode != 0 or rp.returncode != 0:
        failures.append("the ZeRO-3 runs with and without parameter offload did not both finish")
    else:
        same_losses("zero-3 losses:", f"{d}/z3.rec", "zero-3 + param offload:", f"{d}/z3par.rec",
                    "parameter offload changed the losses")
        cats = json.load(open(f"{d}/z3par.rec"))["memory"][0]["by_category"]
        base_cats = json.load(open(f"{d}/z3.rec"))["memory"][0]["by_category"]
        print("rank 0: params", cats["params"], "host_params", cats["host_params"], "(without offload: params",
              base_cats["params"], ")")
        if not (cats["params"] == 0 and cats["host_params"] == base_cats["params"] > 0):
            failures.append("the offloaded partitions are not (all) in host memory")

    # Parameter partitions on NVMe, with the optimizer on the GPU and with it on
    # NVMe too, against the same plans keeping them in host memory.
    for opt in ("none", "nvme"):
        cpu_opt = "cpu" if opt == "nvme" else "none"
        host_plan, drive_plan = f"{d}/par_host_{opt}.json", f"{d}/par_nvme_{opt}.json"
        plans.write_plan_file(host_plan, MODEL, dp=2, zero=3, mb=2, ga=2, offload_params="cpu", offload=cpu_opt)
        plans.write_plan_file(drive_plan, MODEL, dp=2, zero=3, mb=2, ga=2, offload_params="nvme", offload=opt)
        rh = run(host_plan, "--steps", "4", "--record", f"{d}/par_host_{opt}.rec")
        rd, seen = run_watching(nvme_dir, drive_plan, "--steps", "4", "--record", f"{d}/par_nvme_{opt}.rec",
                                "--nvme-dir", nvme_dir)
        if rh.returncode != 0 or rd.returncode != 0:
            failures.append(f"parameter offload to NVMe (optimizer {opt}): a run failed")
            continue
        same_losses(f"params on host, opt {cpu_opt}:", f"{d}/par_host_{opt}.rec",
                    f"params on NVMe, opt {opt}:", f"{d}/par_nvme_{opt}.rec",
                    f"parameters on NVMe (optimizer {opt}) changed the losses")
        params_files = sorted(f for f in seen if f.startswith("ztune-params"))
        print("parameter files seen during the run:", params_files)
        if len(params_files) != 2:
            failures.append(f"expected 2 rank parameter files in --nvme-dir, saw {params_files}")
        if os.listdir(nvme_dir):
            failures.append(f"files left behind: {os.listdir(nvme_dir)}")
        cats = json.load(open(f"{d}/par_nvme_{opt}.rec"))["memory"][0]["by_category"]
        print("rank 0: params", cats["params"], "host_params", cats["host_params"], "host_staging",
              cats.get("host_staging"))
        if cats["params"] != 0 or cats["host_params"] != 0:
            failures.append("parameters on NVMe still hold partitions in memory")

    # Checkpoint at step 2, resume to step 4, with the partitions on NVMe.
    check_resume(f"{d}/par_nvme_none.json", 4, f"{d}/ckpt_par", nvme_dir, f"{d}/par_nvme_none.rec",
                 f"{d}/par_resumed.rec", "parameters on NVMe")

for f in failures:
    print("FAILED:", f)
sys.exit(1 if failures else 0)
