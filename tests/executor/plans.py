"""Plan files for the executor's end-to-end tests (schema ztune.planfile/1)."""
import json


def plan(dp=1, tp=1, pp=1, zero=0, mb=2, ga=4, sp=False, recompute="none", schedule="1f1b",
         offload="none", bucket=5e8, persist=0.0, overlap=True, precision="fp32", offload_params="none", v=1,
         sparse="none", sparse_block=64, attention="standard", stage_layers=None, cp=1, ulysses=1, dp_shard=0,
         recompute_num_layers=0, chunk_layers=None):
    out = {"schema": "ztune.plan/1", "dp": dp, "tp": tp, "pp": pp, "virtual_stages": v,
            "sequence_parallel": sp, "zero_stage": zero,
            "offload": {"optimizer": offload, "params": offload_params},
            "micro_batch": mb, "grad_accum": ga, "global_batch": mb * ga * dp,
            "recompute": recompute, "precision": precision, "schedule": schedule,
            "communication": {"overlap_comm": overlap, "reduce_bucket_elems": bucket,
                              "allgather_bucket_elems": 5e8, "prefetch_bucket_elems": 5e7,
                              "max_live_params": 1e9, "param_persistence_threshold": persist},
            "onebit_adam": {"enabled": False, "freeze_step": 0},
            "sparse_attention": {"layout": sparse, "block": sparse_block}, "zeropp": False,
            "attention": attention}
    if stage_layers is not None:  # uneven pipeline stages (absent: balanced)
        out["stage_layers"] = list(stage_layers)
    if chunk_layers is not None:  # each model chunk's layers (absent: each stage in equal chunks)
        out["chunk_layers"] = list(chunk_layers)
    if cp != 1:  # context parallelism (absent: 1)
        out["cp"] = cp
    if ulysses != 1:  # DeepSpeed-Ulysses (absent: 1)
        out["ulysses"] = ulysses
    if dp_shard:  # hybrid sharding: ZeRO-3 in groups of dp_shard (absent: all of dp × cp)
        out["dp_shard"] = dp_shard
    if recompute_num_layers:  # Megatron's block method: the first N layers of each chunk (absent: all)
        out["recompute_num_layers"] = recompute_num_layers
    return out


def ranks(dp=1, tp=1, pp=1, cp=1, ulysses=1, **_):
    """Ranks a plan() of these keywords runs on (dp × tp × pp × cp × ulysses)."""
    return dp * tp * pp * cp * ulysses


def write_plan_file(path, model, **kw):
    with open(path, "w") as f:
        json.dump({"schema": "ztune.planfile/1", "plan": plan(**kw), "model": model}, f, indent=1)
