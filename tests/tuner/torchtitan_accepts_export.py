#!/usr/bin/env python3
"""ztune export --format torchtitan, read by an independent TOML parser
(Python's tomllib) and checked against torchtitan's JobConfig fields
(fixtures/torchtitan_job_config_fields.json, from torchtitan's
torchtitan/config/job_config.py): every section and key exists there with its
type, the parallel degrees multiply to the plan's devices (torchtitan's
ParallelDims check), and the batch sizes give the plan's accumulation.

    torchtitan_accepts_export.py ZTUNE_BIN
"""
import json
import os
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
FIELDS = json.load(open(os.path.join(HERE, "fixtures", "torchtitan_job_config_fields.json")))
ZTUNE = sys.argv[1]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def typed(value, kind):
    if isinstance(kind, list):
        return value in kind
    return {"str": lambda v: isinstance(v, str), "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "bool": lambda v: isinstance(v, bool), "list": lambda v: isinstance(v, list)}[kind](value)


def run(*args):
    return subprocess.run([ZTUNE, *args], capture_output=True, text=True)


def exported(tmp, name, search_args):
    plan = os.path.join(tmp, name + ".json")
    r = run("search", "--engine", "fsdp", "--db", os.path.join(tmp, "r.db"), "--out", plan, *search_args)
    if r.returncode != 0:
        failures.append(f"{name}: search failed ({r.returncode}): {r.stderr.strip()[-400:]}")
        return None, None
    r = run("export", "--format", "torchtitan", plan)
    if r.returncode != 0:
        failures.append(f"{name}: export failed ({r.returncode}): {r.stderr.strip()}")
        return None, None
    return json.load(open(plan)), tomllib.loads(r.stdout)


def check_config(name, pf, cfg):
    for section, keys in cfg.items():
        check(section in FIELDS["sections"], f"{name}: [{section}] is not a torchtitan JobConfig section")
        known = FIELDS["sections"].get(section, {})
        for key, value in keys.items():
            check(key in known, f"{name}: {section}.{key} is not a torchtitan field")
            if key in known:
                check(typed(value, known[key]), f"{name}: {section}.{key} = {value!r} is not a {known[key]}")
    plan = pf["plan"]
    par = cfg["parallelism"]
    degrees = (par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"] *
               par["tensor_parallel_degree"] * par["context_parallel_degree"] * par["pipeline_parallel_degree"])
    gpus = plan["dp"] * plan["tp"] * plan["pp"] * plan.get("cp", 1)
    check(degrees == gpus, f"{name}: degrees multiply to {degrees}, the plan has {gpus} devices")
    check(par["tensor_parallel_degree"] == plan["tp"] and par["pipeline_parallel_degree"] == plan["pp"],
          f"{name}: tp/pp degrees differ from the plan")
    tr = cfg["training"]
    check(tr["global_batch_size"] == plan["global_batch"], f"{name}: global batch differs")
    dp = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
    # torchtitan: gradient accumulation = global / (local × dp); pipeline
    # micro-batches = local / pipeline_parallel_microbatch_size.
    accum = tr["global_batch_size"] // (tr["local_batch_size"] * dp)
    if plan["pp"] > 1:
        check(accum == 1, f"{name}: a pipeline plan accumulates inside the local batch, got accumulation {accum}")
        check(tr["local_batch_size"] // par["pipeline_parallel_microbatch_size"] == plan["grad_accum"],
              f"{name}: pipeline micro-batches differ from the plan's {plan['grad_accum']}")
        check(par["pipeline_parallel_schedule"] in FIELDS["schedules"], f"{name}: unknown schedule")
        points = par["pipeline_parallel_split_points"]
        stages = plan["pp"] * plan.get("virtual_stages", 1)
        firsts = [int(p.split(".")[1]) for p in points]
        check(len(points) == stages - 1 and firsts == sorted(set(firsts)) and 0 < firsts[0] and
              firsts[-1] < pf["model"]["layers"], f"{name}: split points {points} for {stages} stages")
    else:
        check(tr["local_batch_size"] == plan["micro_batch"], f"{name}: local batch is not the micro-batch")
        check(accum == plan["grad_accum"], f"{name}: accumulation {accum}, the plan's {plan['grad_accum']}")
    # torchtitan's selective modes are ztune's alternate_mm ("op") and
    # alternate_layers (every "2"nd block); Korthikanti's selective with a
    # flash kernel is the kernel's own recomputation (none).
    ac = cfg["activation_checkpoint"]
    option = {"alternate_mm": "op", "alternate_layers": "2"}.get(plan.get("recompute_policy"))
    expected = "full" if plan["recompute"] == "full" else "selective" if option else "none"
    check(ac["mode"] == expected, f"{name}: activation checkpointing {ac['mode']}, expected {expected}")
    if option:
        check(ac.get("selective_ac_option") == option, f"{name}: selective_ac_option differs")
    check(tr["seq_len"] == pf["model"]["seq_len"], f"{name}: sequence length differs")


with tempfile.TemporaryDirectory() as tmp:
    cases = {
        "fsdp-405b": ["--cluster", "dgx-h100x32", "--model", "llama-405b"],
        "hsdp-70b": ["--cluster", "dgx-h100x32", "--model", "llama-70b", "--zero", "3", "--dp-shard", "8"],
        # dp 1: torchtitan runs ZeRO 0 as DDP, which it refuses beside TP or PP
        # ("DDP has not supported > 1D parallelism"), and the fsdp engine's
        # rules refuse it too (fsdp: DDP is data parallelism alone).
        "interleaved-70b": ["--cluster", "dgx-h100x32", "--model", "llama-70b", "--gpus", "32", "--pp", "4", "--tp",
                            "8"],
        "uneven-70b": ["--cluster", "dgx-h100x32", "--model", "llama-70b", "--gpus", "24", "--pp", "3", "--tp", "8"],
        # FP8 linear layers: torchtitan's float8 converter with tensorwise scales.
        "float8-70b": ["--cluster", "dgx-h100x32", "--model", "llama-70b", "--fp8", "tensorwise"],
    }
    for name, args in cases.items():
        pf, cfg = exported(tmp, name, args)
        if cfg is not None:
            check_config(name, pf, cfg)
            if name == "float8-70b":
                check(pf["plan"].get("fp8") == "tensorwise", "float8-70b: the plan is not FP8")
                check(cfg["model"].get("converters") == ["float8"], "float8-70b: no float8 converter")
                check(cfg.get("float8", {}).get("recipe_name") == "tensorwise", "float8-70b: recipe is not tensorwise")
                check("output" in cfg["float8"].get("filter_fqns", []), "float8-70b: the output layer is converted")
            elif "float8" in cfg or "converters" in cfg["model"]:
                check(False, f"{name}: a 16-bit plan exported with float8")
            if name == "hsdp-70b":
                check(cfg["parallelism"]["data_parallel_shard_degree"] == 8, "hsdp-70b: shard degree is not 8")
    # A model torchtitan's Llama 3 is not: refused, exit 2, naming the field.
    plan = os.path.join(tmp, "gpt.json")
    r = run("search", "--engine", "fsdp", "--db", os.path.join(tmp, "r.db"), "--out", plan,
            "--cluster", "dgx-a100-80gb", "--model", "gpt2-1.5b")
    check(r.returncode == 0, f"gpt2 search failed: {r.stderr[-300:]}")
    if r.returncode == 0:
        r = run("export", "--format", "torchtitan", plan)
        check(r.returncode == 2 and "$.model.activation" in r.stderr and "Llama 3" in r.stderr,
              f"gpt2 export: expected exit 2 naming $.model.activation, got {r.returncode}: {r.stderr.strip()}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("torchtitan export: 4 plans read by tomllib, every field torchtitan's; a GPT-2 plan refused")
