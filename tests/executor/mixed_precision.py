"""16-bit storage (issue 24): bf16 and fp16 plans train on the CPU backend with
16-bit parameters, gradients and activations, fp32 master weights and Adam
states, every kernel computing in fp32 on the stored values.

Oracles, for the tiny model, 5 steps of lr 1e-3 with one seed and data:
 - the fp32 single-rank run: a 16-bit plan's losses stay within 16-bit
   rounding of it. Storage rounds every stored value to 8 (bf16) or 11 (fp16)
   significant bits, relative u = 2^-8 = 3.9e-3 and 2^-11 = 4.9e-4 per value;
   the loss is a mean over 512 tokens of sums of such values, so its relative
   error is bounded by u (it comes out far smaller, the roundings averaging).
 - the single-rank run in the same precision: a parallel plan rounds other
   partial results to 16 bits (a tensor-parallel rank's partial product before
   the all-reduce, a data-parallel rank's gradient before the sum), so it
   agrees with it to 16-bit rounding too: the same bound u (ZeRO++ plans: its
   quantization's 1e-2, zeropp.py's fp32 bound, plus u).
 - memory, from the run record's tracked allocations: 2 bytes a parameter of
   16-bit parameters and gradients and 12 of fp32 master, momentum and
   variance (the ZeRO paper's 16Ψ, §3.1), against 4 + 4 + 8 for the fp32 plan;
   gradients kept in fp32 when the plan reduces them in fp32 (Megatron's
   main_grad); the stored activations half the fp32 plan's.
 - resuming: a bf16 ZeRO-2 run checkpointed after step 3 and resumed gives
   steps 4 and 5 bit for bit (the checkpoint holds the 16-bit parameters, the
   fp32 masters and the Adam states), and so does one with bf16 states (whose
   master is the bf16 parameters: the checkpoint holds no copy of it).
 - 16-bit optimizer states (plan optimizer.master_dtype / moments_dtype: NeMo's
   optim.dtype bf16, Megatron-Core's precision-aware optimizer): Adam computes
   in fp32 on the widened states and stores them rounded, so its update moves
   by a unit roundoff of itself, far below the loss bound u; the tracked
   optimizer bytes are the fp32-state plan's times K/12 (ZeRO's K: 2 + 2 with
   bf16 masters and moments beside bf16 parameters, which are then the master
   as NeMo's store_params false keeps it, 2 + 2 + 2 with fp16 masters beside
   them, 4 + 2 + 2 with fp32 masters, 2 + 2 for an fp32 model's moments).

usage: mixed_precision.py WORKER "MPIRUN ARGS" [case ...]
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import plans  # noqa: E402

PSI = 220544  # the tiny model's parameters (GPT-2's closed form: 12·L·h² + 13·L·h + (V + s)·h + 2h)
UNIT = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}
STEPS = 5
CASES = {
    "dp2_zero1": dict(dp=2, mb=2, ga=2, zero=1),
    "dp2_zero2": dict(dp=2, mb=2, ga=2, zero=2),
    "dp2_zero3": dict(dp=2, mb=2, ga=2, zero=3, bucket=3e4),
    "dp2_zero2_offload": dict(dp=2, mb=2, ga=2, zero=2, offload="cpu"),
    "dp2_zero3_offload_params": dict(dp=2, mb=2, ga=2, zero=3, bucket=3e4, offload="cpu", offload_params="cpu"),
    "dp2_zero3_offload_nvme": dict(dp=2, mb=2, ga=2, zero=3, bucket=3e4, offload="nvme"),
    "tp2_sp": dict(tp=2, sp=True),
    "pp2_1f1b_recompute_full": dict(pp=2, recompute="full"),
    "dp2_tp2_pp2_interleaved_zero1_sp": dict(dp=2, tp=2, pp=2, v=2, schedule="interleaved", mb=1, ga=4, zero=1,
                                            sp=True),
    "cp2_flash": dict(cp=2, attention="flash"),
    "ulysses2": dict(ulysses=2),
    "tp2_sparse_fixed_selective": dict(tp=2, sparse="fixed", sparse_block=16, recompute="selective"),
    "llama_tp2_flash": dict(model="tiny-llama", tp=2, attention="flash"),
    "hsdp_dp4_shard2": dict(dp=4, mb=1, ga=2, zero=3, dp_shard=2, bucket=3e4),
    "fp16_dp2_zero2": dict(dp=2, mb=2, ga=2, zero=2, precision="fp16"),
    # The loss scale's unscaling inside the offloaded step (the gradients' fp32 copies on their way to host Adam).
    "fp16_dp2_zero2_offload": dict(dp=2, mb=2, ga=2, zero=2, offload="cpu", precision="fp16"),
    "fp32_grads_dp2_zero1": dict(dp=2, mb=2, ga=2, zero=1, grad_reduce="fp32"),
    # ZeRO++ (int8 weight gathers, int4 gradients) on one node, and on 4 ranks
    # acting as 2 nodes × 2 (hpZ's secondary copy, the two-level reduction).
    "zeropp_dp2_zero3": dict(dp=2, mb=2, ga=2, zero=3, bucket=3e4, zeropp=True),
    "zeropp_dp4_two_nodes": dict(dp=4, mb=1, ga=2, zero=3, bucket=3e4, zeropp=True, ranks_per_node=2),
    # 16-bit optimizer states: NeMo's optim.dtype bf16 (all three states), an
    # fp16 master with bf16 moments (Megatron-Core's --main-params-dtype fp16),
    # and an fp32 model's bf16 moments.
    "states_bf16_dp2_zero1": dict(dp=2, mb=2, ga=2, zero=1, master="bf16", moments="bf16"),
    "states_fp16_master_bf16_moments_dp2_zero2": dict(dp=2, mb=2, ga=2, zero=2, master="fp16", moments="bf16"),
    "states_bf16_moments_tp2_sp": dict(tp=2, sp=True, moments="bf16"),
    "states_fp32_model_bf16_moments_dp2_zero1": dict(dp=2, mb=2, ga=2, zero=1, moments="bf16", precision="fp32"),
}
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# With ZTUNE_BIN set (CTest sets it): `ztune run` of each 16-bit state plan
# compares the memory model's peak with the executor's measured one: within
# 10 % (calibration_loop.py's target).
TARGET_MEMORY = 0.10
# ZeRO++ quantizes weights to int8 and gradients to int4 in groups of 2048 (its
# own numerics, as DeepSpeed's): against the unquantized single rank its losses
# drift by the quantization's 1e-2 (zeropp.py's bound for fp32 storage) plus
# 16-bit storage's unit roundoff.
QUANTIZED_BOUND = 1e-2 + 2.0 ** -8


def run(worker, mpirun, workdir, name, kw, model, extra=(), steps=STEPS, lr="1e-3"):
    kw = dict(kw)
    grad_reduce = kw.pop("grad_reduce", None)
    zeropp = kw.pop("zeropp", False)
    states = {k: kw.pop(k) for k in ("master", "moments") if k in kw}
    per_node = kw.pop("ranks_per_node", 0)
    if per_node:
        extra = list(extra) + ["--ranks-per-node", str(per_node)]
    path = os.path.join(workdir, name + ".json")
    plans.write_plan_file(path, model, **kw)
    if grad_reduce or zeropp or states:
        with open(path) as f:
            doc = json.load(f)
        if grad_reduce:
            doc["plan"]["communication"]["grad_reduce_dtype"] = grad_reduce
        doc["plan"]["zeropp"] = zeropp
        if states:
            doc["plan"]["optimizer"] = {"master_dtype": states.get("master", "fp32"),
                                        "moments_dtype": states.get("moments", "fp32")}
        with open(path, "w") as f:
            json.dump(doc, f)
    n = plans.ranks(**kw)
    record = os.path.join(workdir, name + ".record.json")
    cmd = mpirun + ["-np", str(n), worker, path, "--steps", str(steps), "--seed", "7", "--record", record,
                    "--lr", lr] + list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"{name}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    with open(record) as f:
        r = json.load(f)
    return np.array(r["losses"]), r["memory"][0]["by_category"]


def peak_vs_model(workdir, name):
    """`ztune run` of the plan file run() wrote (2 steps): its measured peak and the memory model's error on it."""
    p = subprocess.run([os.environ["ZTUNE_BIN"], "run", os.path.join(workdir, name + ".json"), "--cluster", "local-cpu",
                        "--steps", "2", "--no-db", "--json"], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"{name}: ztune run exit {p.returncode}\n{p.stderr}")
    total = json.loads(p.stdout)["memory_vs_prediction"]["total"]
    return total["measured_bytes"], total["error"]


def rel(a, b):
    return float(np.max(np.abs(a - b) / np.abs(b)))


def main():
    worker, mpirun = sys.argv[1], sys.argv[2].split()
    selected = sys.argv[3:] or list(CASES)
    data = os.environ.get("ZTUNE_DATA_DIR", "data")

    def load_model(name):
        with open(os.path.join(data, "models", name + ".json")) as f:
            return json.load(f)

    failures = 0

    def check(name, ok, detail):
        nonlocal failures
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:34s} {detail}")

    with tempfile.TemporaryDirectory() as d:
        singles = {}

        def single(model_name, precision):
            key = (model_name, precision)
            if key not in singles:
                singles[key] = run(worker, mpirun, d, f"single_{model_name}_{precision}", dict(precision=precision),
                                   load_model(model_name))
            return singles[key]

        # One rank: the precisions against fp32, and the memory closed forms.
        fp32_losses, fp32_mem = single("tiny", "fp32")
        check("fp32 model states", fp32_mem["params"] == 4 * PSI and fp32_mem["grads"] == 4 * PSI
              and fp32_mem["optimizer"] == 8 * PSI,
              f"params {fp32_mem['params']:.0f} grads {fp32_mem['grads']:.0f} optimizer {fp32_mem['optimizer']:.0f}")
        for precision in ("bf16", "fp16"):
            losses, mem = single("tiny", precision)
            err = rel(losses, fp32_losses)
            check(f"{precision} single rank vs fp32", err <= UNIT[precision],
                  f"loss rel {err:.1e} (bound {UNIT[precision]:.1e}), losses {np.array2string(losses, precision=5)}")
            check(f"{precision} model states", mem["params"] == 2 * PSI and mem["grads"] == 2 * PSI
                  and mem["optimizer"] == 12 * PSI,
                  f"params {mem['params']:.0f} grads {mem['grads']:.0f} optimizer {mem['optimizer']:.0f} "
                  f"(16Ψ = {16 * PSI})")
            ratio = mem["activations"] / fp32_mem["activations"]
            check(f"{precision} stored activations", 0.45 <= ratio <= 0.55,
                  f"{mem['activations']:.0f} bytes, {ratio:.3f} of fp32's (norm statistics stay fp32)")
        for name in selected:
            kw = dict(CASES[name])
            model_name = kw.pop("model", "tiny")
            precision = kw.setdefault("precision", "bf16")
            try:
                ref, _ = single(model_name, precision)
                losses, mem = run(worker, mpirun, d, name, kw, load_model(model_name))
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                failures += 1
                print(f"FAIL {name}: {e}")
                continue
            err = rel(losses, ref)
            bound = QUANTIZED_BOUND if kw.get("zeropp") else UNIT.get(precision, UNIT["bf16"])
            detail = f"loss rel {err:.1e} vs the single {precision} rank (bound {bound:.1e})"
            ok = len(losses) == STEPS and err <= bound
            if "master" in kw or "moments" in kw:
                # The same plan with fp32 states holds the same partitions:
                # its optimizer bytes × K/12 (fp32 model: /8).
                wide_kw = {k: v for k, v in kw.items() if k not in ("master", "moments")}
                _, wide = run(worker, mpirun, d, name + "_fp32_states", wide_kw, load_model(model_name))
                fp32_model = precision == "fp32"
                # A master of the parameters' own dtype is the parameters: no bytes of its own.
                master_is_params = fp32_model or kw.get("master", "fp32") == precision
                k = (0 if master_is_params else DTYPE_BYTES[kw.get("master", "fp32")]) + 2 * DTYPE_BYTES[kw["moments"]]
                expected = wide["optimizer"] * k / (8 if fp32_model else 12)
                ok = ok and mem["optimizer"] == expected and mem["params"] == wide["params"]
                detail += f", optimizer {mem['optimizer']:.0f} = {k}/{8 if fp32_model else 12} of fp32 states'"
                if os.environ.get("ZTUNE_BIN"):
                    peak, err = peak_vs_model(d, name)
                    ok = ok and abs(err) <= TARGET_MEMORY
                    detail += f", peak {peak / 2**20:.2f} MiB predicted {err:+.1%}"
            if "grad_reduce" in kw or name.startswith("fp32_grads"):
                # fp32 gradients beside 16-bit parameters: 4 bytes a parameter, all of them under ZeRO-1.
                ok = ok and mem["grads"] == 4 * PSI and mem["params"] == 2 * PSI
                detail += f", grads {mem['grads']:.0f} (4Ψ = {4 * PSI})"
            check(name, ok, detail)
        # A checkpoint holds the 16-bit parameters and the masters and states
        # (fp32, or bf16 moments with the parameters as the master): training
        # resumed after step 3 continues bit for bit.
        for label, kw in (("bf16 ZeRO-2 resume", dict(dp=2, mb=2, ga=2, zero=2, precision="bf16")),
                          ("bf16-state ZeRO-2 resume", dict(dp=2, mb=2, ga=2, zero=2, precision="bf16",
                                                            master="bf16", moments="bf16"))):
            ckpt = os.path.join(d, "ckpt_" + str(len(label)))
            tag = label.split()[0]
            try:
                whole, _ = run(worker, mpirun, d, f"resume_whole_{tag}", kw, load_model("tiny"))
                run(worker, mpirun, d, f"resume_first_{tag}", kw, load_model("tiny"),
                    ["--checkpoint-every", "3", "--checkpoint-dir", ckpt], steps=3)
                resumed, _ = run(worker, mpirun, d, f"resume_rest_{tag}", kw, load_model("tiny"),
                                 ["--resume", "--checkpoint-dir", ckpt])
                check(label, list(resumed[-2:]) == list(whole[-2:]),
                      f"steps 4-5 {whole[-2:]} uninterrupted, {resumed[-2:]} resumed")
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                check(label, False, str(e))
        # fp16's dynamic loss scale is part of the run: at lr 0.3 early steps
        # overflow, the scale halves and the skipped steps leave Adam's bias
        # correction behind. A checkpoint after step 8 (of the same 10 steps:
        # the learning rate's decay spans --steps) keeps them, so steps 9 and
        # 10 resume bit for bit, at the uninterrupted run's scale (it had
        # restarted at 2^16, and trained differently, without an error).
        label = "fp16 ZeRO-2 resume after overflows"
        kw = dict(dp=2, mb=2, ga=2, zero=2, precision="fp16")
        ckpt = os.path.join(d, "ckpt_fp16")
        unclipped = ["--grad-clip", "0"]
        try:
            whole, _ = run(worker, mpirun, d, "resume_whole_fp16", kw, load_model("tiny"), unclipped, 10, "0.3")
            run(worker, mpirun, d, "resume_first_fp16", kw, load_model("tiny"),
                unclipped + ["--checkpoint-every", "8", "--checkpoint-dir", ckpt], 10, "0.3")
            resumed, _ = run(worker, mpirun, d, "resume_rest_fp16", kw, load_model("tiny"),
                             unclipped + ["--resume", "--checkpoint-dir", ckpt], 10, "0.3")

            def scales(name):
                with open(os.path.join(d, name + ".record.json")) as f:
                    return [(s["loss_scale"], s["skipped"]) for s in json.load(f)["steps"]]
            before = scales("resume_whole_fp16")
            skipped = sum(1 for _, k in before[:8] if k)
            check(label, skipped > 0 and list(resumed[-2:]) == list(whole[-2:]) and
                  scales("resume_rest_fp16") == before[-2:],
                  f"{skipped} of the first 8 steps skipped; steps 9-10 {whole[-2:]} at {before[-2:]} uninterrupted, "
                  f"{resumed[-2:]} at {scales('resume_rest_fp16')} resumed")
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            check(label, False, str(e))
        # Selective recomputation with the standard kernel: the attention's
        # backward first recomputes the probabilities (b·a·s² in the storage
        # type) into workspace. At 512 tokens they are a third of the peak,
        # which the memory model missed until it counted them (-31 %).
        if os.environ.get("ZTUNE_BIN"):
            long_tiny = dict(load_model("tiny"), seq_len=512, name="tiny-512")
            for precision in ("fp32", "bf16"):
                name = f"selective_standard_s512_{precision}"
                plans.write_plan_file(os.path.join(d, name + ".json"), long_tiny, mb=4, ga=1, recompute="selective",
                                      precision=precision)
                try:
                    peak, err = peak_vs_model(d, name)
                    check(name, abs(err) <= TARGET_MEMORY, f"peak {peak / 2**20:.2f} MiB predicted {err:+.1%}")
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    check(name, False, str(e))
            # Megatron's block recomputation (the first layer of the tiny
            # model's 4 recomputed, 3 kept whole): its peak lies between full
            # recomputation's and none's, and the model predicts it.
            peaks = {}
            for name, kw in (("block1_s512", dict(recompute="full", recompute_num_layers=1)),
                             ("full_s512", dict(recompute="full")), ("none_s512", dict(recompute="none"))):
                plans.write_plan_file(os.path.join(d, name + ".json"), long_tiny, mb=4, ga=1, precision="bf16", **kw)
                try:
                    peaks[name], err = peak_vs_model(d, name)
                    check(name, abs(err) <= TARGET_MEMORY, f"peak {peaks[name] / 2**20:.2f} MiB predicted {err:+.1%}")
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    check(name, False, str(e))
            if len(peaks) == 3:
                check("block1_between_full_and_none", peaks["full_s512"] < peaks["block1_s512"] < peaks["none_s512"],
                      ", ".join(f"{k} {v / 2**20:.2f} MiB" for k, v in peaks.items()))
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
