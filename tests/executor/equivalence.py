"""The executor's core test: every parallel plan trains like one process.

Each case runs ztune-worker under mpirun for 5 steps on the tiny model with the
same seed and data as the single-rank run, and must give the same losses
(relative 1e-5) and the same final parameters. The oracle is the single-rank run
of the same model, data and seed. Tolerances: partial sums are added in another
order (tensor-parallel all-reduces, data-parallel sums, pipeline micro-batches),
so results differ by fp32 rounding (~1e-7 relative per operation). Checked:
 - losses of all 5 steps: relative 1e-5;
 - step 1's reduced gradients (ZeRO 0/1 cases, --dump-grads): max|a − b| ≤ 1e-5 ·
   max|b| per tensor — the tight check that the parallel maths is the same maths;
 - final parameters: max|a − b| ≤ 5e-5 absolute. Adam divides by √v, so a
   gradient that is pure rounding noise (the key bias of attention has a true
   gradient of exactly zero: softmax ignores a constant shift) still moves its
   parameter by up to lr per step in a noise-chosen direction. 5e-5 is 1% of the
   largest total movement Adam allows in 5 steps of lr ≤ 1e-3 (5e-3).

usage: equivalence.py WORKER "MPIRUN ARGS" [case ...]
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import plans  # noqa: E402
import safetensors_np  # noqa: E402

CASES = {
    "dp2_zero0": dict(dp=2, mb=2, ga=2, zero=0),
    "dp2_zero1": dict(dp=2, mb=2, ga=2, zero=1),
    "dp2_zero2": dict(dp=2, mb=2, ga=2, zero=2),
    "dp2_zero3": dict(dp=2, mb=2, ga=2, zero=3, bucket=3e4),
    "dp2_zero2_offload": dict(dp=2, mb=2, ga=2, zero=2, offload="cpu"),
    "dp2_zero1_buckets_no_overlap": dict(dp=2, mb=1, ga=4, zero=1, bucket=2e4, overlap=False),
    "tp2": dict(tp=2),
    "tp2_sp": dict(tp=2, sp=True),
    "pp2_gpipe": dict(pp=2, schedule="gpipe"),
    "pp2_1f1b": dict(pp=2),
    "pp4_1f1b": dict(pp=4),
    # Interleaved 1F1B: 2 stages × 2 model chunks of one layer each (the tiny
    # model has 4), 4 micro-batches; stage 1 sends chunk 0's output back to
    # stage 0's chunk 1 and the gradients travel the same wrap-around link.
    "pp2_interleaved_v2": dict(pp=2, v=2, schedule="interleaved"),
    "dp2_tp2_pp2_interleaved_zero1_sp": dict(dp=2, tp=2, pp=2, v=2, schedule="interleaved", mb=1, ga=4, zero=1,
                                            sp=True),
    "pp2_interleaved_v2_recompute_full_buckets": dict(pp=2, v=2, schedule="interleaved", recompute="full",
                                                      bucket=2e4),
    # Uneven stages (issue 19) on the tiny model's 4 layers: 3 stages balanced
    # as DeepSpeed's uniform partition (2 + 1 + 1), and stated partitions.
    "pp3_1f1b_uneven": dict(pp=3),
    "pp3_gpipe_stages_1_2_1": dict(pp=3, schedule="gpipe", stage_layers=[1, 2, 1]),
    "pp2_1f1b_stages_3_1": dict(pp=2, stage_layers=[3, 1]),
    "dp2_pp3_zero1_stages_1_1_2": dict(dp=2, pp=3, mb=1, ga=4, zero=1, stage_layers=[1, 1, 2]),
    # Uneven stages under interleaved 1F1B (Megatron-Core's uneven first/last
    # stages with a virtual pipeline): each stage cut into 2 equal chunks,
    # chunk c of stage r the virtual stage c·pp + r. A 6-layer tiny model:
    # stage 0 holds layers 0-1 and 3-4, stage 1 layers 2 and 5.
    "pp2_interleaved_stages_4_2": dict(layers=6, pp=2, v=2, schedule="interleaved", stage_layers=[4, 2]),
    "pp2_interleaved_stages_6_2_flash_recompute_full": dict(layers=8, pp=2, v=2, schedule="interleaved",
                                                           stage_layers=[6, 2], attention="flash",
                                                           recompute="full"),
    "dp2_pp2_interleaved_stages_2_4_zero1": dict(layers=6, dp=2, pp=2, v=2, schedule="interleaved", mb=1, ga=4,
                                                 zero=1, stage_layers=[2, 4]),
    # Megatron-Core's --account-for-embedding/loss-in-pipeline-split under a
    # virtual pipeline (Plan::chunk_layers): the first chunk (beside the
    # embedding) and the last (beside the loss) one layer short. 6 layers + 2
    # over 2 × 2 chunks: 1 + 2 + 2 + 1, stages of 3 that 2 does not cut evenly;
    # 2 + 2 over 2 × 2: both end chunks empty (Llama 3.1 405B's shape), with
    # the block method; 7 + 1 (the embedding only) with dp, ZeRO-1 and flash.
    "pp2_interleaved_chunks_1_2_2_1": dict(layers=6, pp=2, v=2, schedule="interleaved", stage_layers=[3, 3],
                                           chunk_layers=[1, 2, 2, 1]),
    "pp2_interleaved_chunks_0_1_1_0_recompute_block1": dict(layers=2, pp=2, v=2, schedule="interleaved",
                                                            chunk_layers=[0, 1, 1, 0], recompute="full",
                                                            recompute_num_layers=1),
    "dp2_pp2_interleaved_chunks_1_2_2_2_zero1_flash": dict(layers=7, dp=2, pp=2, v=2, schedule="interleaved", mb=1,
                                                           ga=4, zero=1, attention="flash",
                                                           chunk_layers=[1, 2, 2, 2]),
    # Megatron's block recomputation: the first N layers of each model chunk
    # recomputed, the rest kept whole. Layer 0 of 4 alone; with tp, sp and
    # flash 2 of 4; interleaved over stages of 6 and 2 layers (chunks of 3
    # and 1): 2 of each 3-layer chunk, the 1-layer chunks whole.
    "recompute_full_block1": dict(recompute="full", recompute_num_layers=1),
    "tp2_sp_flash_recompute_block2": dict(tp=2, sp=True, attention="flash", recompute="full", recompute_num_layers=2),
    "pp2_interleaved_stages_6_2_recompute_block2": dict(layers=8, pp=2, v=2, schedule="interleaved",
                                                       stage_layers=[6, 2], recompute="full",
                                                       recompute_num_layers=2),
    "dp2_tp2": dict(dp=2, tp=2, mb=2, ga=2),
    "dp2_pp2": dict(dp=2, pp=2, mb=1, ga=4),
    "tp2_pp2": dict(tp=2, pp=2),
    "dp2_tp2_pp2_zero1": dict(dp=2, tp=2, pp=2, mb=1, ga=4, zero=1, sp=True),
    # Block-sparse attention whose layout covers every causal block (the tiny
    # model's 64 tokens are 4 blocks of 16, one "fixed" window of 4): the
    # sparse kernels must give dense attention's numbers, here split over tp.
    "tp2_sparse_fixed_dense_layout": dict(tp=2, sparse="fixed", sparse_block=16, recompute="selective"),
    # A 255-token vocabulary over tp 2 (128 + 127 rows; no padding): the
    # reference is the single-rank run of the same 255-token model.
    "tp2_vocab255": dict(tp=2, vocab=255),
    "dp2_tp2_pp2_vocab255_sp": dict(dp=2, tp=2, pp=2, mb=1, ga=4, zero=1, sp=True, vocab=255),
    # FlashAttention's contract (only the log-sum-exp kept, probabilities
    # recomputed in backward) against the single-rank run of the standard kernel.
    "tp2_sp_flash": dict(tp=2, sp=True, attention="flash"),
    "dp2_tp2_pp2_zero1_sp_flash_recompute_full": dict(dp=2, tp=2, pp=2, mb=1, ga=4, zero=1, sp=True,
                                                     attention="flash", recompute="full"),
    "llama_tp2_flash_recompute_selective": dict(model="tiny-llama", tp=2, attention="flash",
                                                recompute="selective"),
    "recompute_selective": dict(recompute="selective"),
    "recompute_full": dict(recompute="full"),
    "tp2_sp_recompute_full": dict(tp=2, sp=True, recompute="full"),
    # The Llama shape (tiny-llama: RMSNorm, SwiGLU, RoPE, 4 query heads on 2
    # key/value heads, no biases, untied lm_head) against its own single-rank
    # run: tp 2 leaves one K/V head per rank; pp splits the untied embedding
    # and head (no tied-copy group).
    "llama_dp2_zero1": dict(model="tiny-llama", dp=2, mb=2, ga=2, zero=1),
    "llama_dp2_zero3": dict(model="tiny-llama", dp=2, mb=2, ga=2, zero=3, bucket=3e4),
    "llama_tp2_sp_recompute_selective": dict(model="tiny-llama", tp=2, sp=True, recompute="selective"),
    "llama_pp2_1f1b": dict(model="tiny-llama", pp=2),
    "llama_dp2_tp2_pp2_interleaved_zero1_sp": dict(model="tiny-llama", dp=2, tp=2, pp=2, v=2,
                                                  schedule="interleaved", mb=1, ga=4, zero=1, sp=True),
    # GPT-NeoX's shape (tiny-neox: attention and MLP in parallel, their partial
    # sums reduced once; RoPE on a quarter of each head; untied head).
    "neox_tp2_sp_recompute_full": dict(model="tiny-neox", tp=2, sp=True, recompute="full"),
    "neox_dp2_tp2_pp2_zero1": dict(model="tiny-neox", dp=2, tp=2, pp=2, mb=1, ga=4, zero=1),
    # Qwen2's biases on Q, K and V only (qkv_bias): the fused Q|K|V bias is
    # split column-wise with its weight over tp.
    "qwen_dp2_tp2_zero1_sp": dict(model="tiny-llama", qkv_bias=True, dp=2, tp=2, mb=1, ga=4, zero=1, sp=True),
    # Mistral's sliding window (24 of 64 positions) with heads split over tp and a pipeline.
    "window_tp2_pp2_flash": dict(model="tiny-llama", attention_window=24, tp=2, pp=2, mb=2, ga=4, attention="flash"),
    # Context parallelism (issue 19): each 64-token sequence cut into 2·cp
    # load-balanced chunks (rank i holds chunks i and 2cp−1−i), causal
    # attention as a ring over the cp ranks (K/V passed on, dK/dV brought
    # home), gradients reduced over dp × cp. Standard keeps the probabilities,
    # flash only the log-sum-exp; both against the single-rank standard run.
    "cp2": dict(cp=2),
    "cp4": dict(cp=4),
    "cp2_flash": dict(cp=2, attention="flash"),
    "cp4_flash": dict(cp=4, attention="flash"),
    "cp2_recompute_selective": dict(cp=2, recompute="selective"),
    "dp2_cp2_zero1": dict(dp=2, cp=2, mb=1, ga=4, zero=1),
    "cp2_zero3": dict(cp=2, zero=3, bucket=3e4),
    "tp2_cp2_sp_flash": dict(tp=2, cp=2, sp=True, attention="flash"),
    "pp2_cp2_flash_recompute_full": dict(pp=2, cp=2, attention="flash", recompute="full"),
    "llama_cp2_flash": dict(model="tiny-llama", cp=2, attention="flash"),
    "llama_tp2_cp2": dict(model="tiny-llama", tp=2, cp=2),
    # DeepSpeed-Ulysses (issue 19 item 3): each 64-token sequence split into
    # u contiguous row blocks; an all-to-all before attention gives each rank
    # the whole sequence of heads/u heads, another after it returns the output
    # rows (backward: the transposes); gradients reduced over dp × u.
    "ulysses2": dict(ulysses=2),
    "ulysses4": dict(ulysses=4),
    "ulysses2_flash": dict(ulysses=2, attention="flash"),
    "dp2_ulysses2_zero1": dict(dp=2, ulysses=2, mb=1, ga=4, zero=1),
    "ulysses2_zero3": dict(ulysses=2, zero=3, bucket=3e4),
    "ulysses2_recompute_full": dict(ulysses=2, recompute="full"),
    # Selective recomputation re-runs the attention, its all-to-alls included
    # (DeepSpeed re-runs only the local core; the cost model prices that).
    "ulysses2_recompute_selective": dict(ulysses=2, recompute="selective"),
    "pp2_ulysses2_flash": dict(pp=2, ulysses=2, attention="flash"),
    "llama_ulysses2_flash": dict(model="tiny-llama", ulysses=2, attention="flash"),
    # With tensor parallelism: each tp rank's heads/tp heads scattered over its
    # Ulysses group (the ranks of the same tp rank), as Megatron-DeepSpeed runs
    # DistributedAttention inside a tensor-parallel layer.
    "tp2_ulysses2": dict(tp=2, ulysses=2),
    "tp2_ulysses2_flash_recompute_selective": dict(tp=2, ulysses=2, attention="flash", recompute="selective"),
    # Hybrid sharding (issue 19 item 4): ZeRO-3 in shard groups of 2, the two
    # groups replicas (FSDP HYBRID_SHARD / MiCS): gathers and reduce-scatters
    # in the shard group, the partitions all-reduced across replicas at the
    # accumulation boundary. Several buckets so every piece crosses both hops.
    "hsdp_dp4_shard2": dict(dp=4, mb=1, ga=2, zero=3, dp_shard=2, bucket=3e4),
    "hsdp_dp4_shard2_persist": dict(dp=4, mb=1, ga=2, zero=3, dp_shard=2, bucket=3e4, persist=1e3),
    # Buckets smaller than a layer: ZeRO-2/3 retire a bucket's reduction
    # while the backward goes on (kExecutorReductionsInFlight), not at its end.
    "dp2_zero2_small_buckets": dict(dp=2, mb=2, ga=2, zero=2, bucket=2e4),
    "dp4_zero3_small_buckets": dict(dp=4, mb=1, ga=2, zero=3, bucket=2e4),
    "hsdp_dp2_cp2_shard2_flash": dict(dp=2, cp=2, mb=1, ga=4, zero=3, dp_shard=2, bucket=3e4, attention="flash"),
    # ZeRO-3 under a pipeline (FSDP2 under torch.distributed.pipelining,
    # Plan::zero3_held_through_step): every bucket gathered at its first use
    # and held to the step, whole gradients reduce-scattered once. 1F1B,
    # interleaved with uneven stages, tied embeddings across the ends, and
    # hybrid sharding across two replicas.
    "dp2_pp2_zero3_1f1b": dict(dp=2, pp=2, mb=1, ga=4, zero=3, bucket=3e4),
    "dp2_pp2_zero3_interleaved_v2": dict(dp=2, pp=2, v=2, schedule="interleaved", mb=1, ga=4, zero=3, bucket=3e4),
    "dp2_pp3_zero3_stages_1_1_2_recompute_full": dict(dp=2, pp=3, mb=1, ga=4, zero=3, bucket=2e4,
                                                      stage_layers=[1, 1, 2], recompute="full"),
    "hsdp_dp4_pp2_zero3_shard2": dict(dp=4, pp=2, mb=1, ga=2, zero=3, dp_shard=2, bucket=3e4),
}
STEPS = 5


def run(worker, mpirun, workdir, name, kw, model):
    plan_path = os.path.join(workdir, name + ".json")
    plans.write_plan_file(plan_path, model, **kw)
    n = plans.ranks(**kw)
    record = os.path.join(workdir, name + ".record.json")
    weights = os.path.join(workdir, name + ".safetensors")
    grads = os.path.join(workdir, name + ".grads.safetensors")
    cmd = mpirun + ["-np", str(n), worker, plan_path, "--steps", str(STEPS), "--seed", "7",
                    "--record", record, "--save", weights, "--lr", "1e-3"]
    if kw.get("zero", 0) < 2:
        cmd += ["--dump-grads", grads]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if p.returncode != 0:
        raise RuntimeError(f"{name}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    with open(record) as f:
        losses = json.load(f)["losses"]
    g = safetensors_np.load(grads) if os.path.exists(grads) else None
    return np.array(losses), safetensors_np.load(weights), g


def dp_collective_counts(worker, mpirun, workdir, name, kw, model):
    """Rank 0's data-parallel all-gathers and reduce-scatters over STEPS steps."""
    record = os.path.join(workdir, name + ".counts.json")
    plan_path = os.path.join(workdir, name + ".counts.plan.json")
    plans.write_plan_file(plan_path, model, **kw)
    cmd = mpirun + ["-np", str(plans.ranks(**kw)), worker, plan_path, "--steps", str(STEPS), "--seed", "7",
                    "--record", record]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if p.returncode != 0:
        raise RuntimeError(f"{name}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    with open(record) as f:
        dp = json.load(f)["collectives_rank0"].get("dp", {})
    return {k: dp[k]["count"] for k in ("all_gather", "reduce_scatter") if k in dp}


def held_through_step(worker, mpirun, workdir, name, kw, model):
    """ZeRO-3 under a pipeline gathers each bucket once per step and reduce-scatters it once: its counts do
    not grow with the micro-batches (per micro-batch ZeRO-3 would gather twice and reduce once for each).
    The oracle is the same plan with half the micro-batches. Returns what is wrong, or None."""
    many = dp_collective_counts(worker, mpirun, workdir, name + "_ga", kw, model)
    few = dp_collective_counts(worker, mpirun, workdir, name + "_half_ga", dict(kw, ga=kw["ga"] // 2), model)
    if not many.get("all_gather") or many != few or many["all_gather"] != many.get("reduce_scatter"):
        return f"dp collectives with ga {kw['ga']}: {many}, with ga {kw['ga'] // 2}: {few}"
    return None


def main():
    worker, mpirun = sys.argv[1], sys.argv[2].split()
    selected = sys.argv[3:] or list(CASES)
    def load_model(name):
        with open(os.path.join(os.environ.get("ZTUNE_DATA_DIR", "data"), "models", name + ".json")) as f:
            return json.load(f)

    failures = 0
    references = {}  # (model, vocabulary) → the single-rank run of that model
    with tempfile.TemporaryDirectory() as d:
        def reference(case_model):
            key = (case_model["name"], case_model["vocab"], case_model.get("qkv_bias", False),
                   case_model.get("attention_window", 0), case_model["layers"])
            if key not in references:
                tag = ("_qkvb" if key[2] else "") + (f"_w{key[3]}" if key[3] else "") + f"_L{key[4]}"
                references[key] = run(worker, mpirun, d, f"single_{key[0]}_v{key[1]}{tag}", dict(), case_model)
                print(f"single rank, {key[0]}, vocabulary {key[1]}: losses "
                      f"{np.array2string(references[key][0], precision=6)}")
            return references[key]

        reference(load_model("tiny"))
        for name in selected:
            kw = dict(CASES[name])
            model = load_model(kw.pop("model", "tiny"))
            case_model = dict(model, vocab=kw.pop("vocab", model["vocab"]))
            if kw.pop("qkv_bias", False):
                case_model["qkv_bias"] = True
            if "attention_window" in kw:
                case_model["attention_window"] = kw.pop("attention_window")
            if "layers" in kw:  # a deeper tiny model, for the stage partitions a case needs
                case_model["layers"] = kw.pop("layers")
            try:
                ref_losses, ref_params, ref_grads = reference(case_model)
                losses, params, grads = run(worker, mpirun, d, name, kw, case_model)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                failures += 1
                print(f"FAIL {name}: {e}")
                continue
            loss_err = float(np.max(np.abs(losses - ref_losses) / np.abs(ref_losses)))
            param_err = max(float(np.max(np.abs(params[k] - ref_params[k]))) for k in ref_params)
            grad_err = 0.0
            if grads is not None:
                grad_err = max(float(np.max(np.abs(grads[k] - ref_grads[k])) / np.max(np.abs(ref_grads[k])))
                               for k in ref_grads)
            ok = (len(losses) == STEPS and loss_err <= 1e-5 and param_err <= 5e-5 and grad_err <= 1e-5
                  and set(params) == set(ref_params))
            if kw.get("zero") == 3 and kw.get("pp", 1) > 1:
                wrong = held_through_step(worker, mpirun, d, name, kw, case_model)
                if wrong:
                    ok = False
                    print(f"     {name}: not held through the step: {wrong}")
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name:30s} loss rel {loss_err:.1e}  "
                  f"step-1 grad rel {grad_err:.1e}{'' if grads is not None else ' (n/a)'}  "
                  f"final param abs {param_err:.1e}")
    print(f"{len(selected) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
