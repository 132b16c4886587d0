"""Does DeepSpeed accept what `ztune export --format deepspeed` writes?

Exports a fixed set of plan files (every ZeRO stage, CPU and NVMe optimizer and
parameter offload, fp16 and bf16, full and selective recomputation, a pipeline,
ZeRO++, 1-bit Adam, the four sparse attention layouts) and feeds each
ds_config.json to DeepSpeed's own parser, deepspeed.runtime.config.DeepSpeedConfig,
with the plan's dp as the data-parallel world size (through an mpu object, as
Megatron-DeepSpeed passes one). For each config it checks:

  - DeepSpeed parses it: its pydantic sections (zero_optimization with offload,
    fp16, bf16) reject unknown keys, and it asserts
    train_batch_size = micro batch x accumulation x data-parallel world size;
  - no key is silently ignored: every key of a plain-dict section (the top
    level, activation_checkpointing, sparse_attention) must be read by the
    parser; pipeline keys must be read by the installed pipeline engine
    (deepspeed/runtime/pipe/engine.py, found in its source); 1-bit Adam's
    params must be arguments of DeepSpeed's OnebitAdam;
  - the values DeepSpeed ends up with are the plan's (batch sizes, stage,
    bucket sizes, offload devices, dynamic loss scaling, ...): the expected
    values come from the plan file, the actual ones from DeepSpeed's objects.

Launches (issue 23): the launch command and the hostfile the export describes
are fed to DeepSpeed's own launcher (deepspeed.launcher.runner.main, its ssh
and process start stubbed out): the ranks it would start on each host, from
the world_info it hands to every node, must add up to the plan's devices with
each node's count a multiple of tp, for a 250-GPU plan on nodes of 16.

DeepSpeed 0.19 removed sparse attention and 1-bit Adam; with such a version the
cases that need them are reported as skipped (they run on DeepSpeed <= 0.18).

usage: deepspeed_accepts_export.py ZTUNE
Exit 0 when every case passes, 1 when one fails, 77 when `import deepspeed`
fails (CTest shows the test as skipped). Run it with a Python that has
DeepSpeed, e.g. a virtualenv:
    python3 -m venv /tmp/dsvenv && /tmp/dsvenv/bin/pip install torch deepspeed
    /tmp/dsvenv/bin/python tests/tuner/deepspeed_accepts_export.py build/ci/cli/ztune
"""
import copy
import inspect
import json
import logging
import os
import re
import subprocess
import sys
import tempfile

try:
    import deepspeed
    import deepspeed.comm
    from deepspeed.runtime import config as ds_config_module
    from deepspeed.runtime.config import DeepSpeedConfig
except Exception as e:  # ImportError, or a broken torch install under it
    print(f"SKIP: cannot import deepspeed ({type(e).__name__}: {e})")
    sys.exit(77)

ZTUNE = sys.argv[1]
DATA = os.environ.get("ZTUNE_DATA_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data"))
DS_DIR = os.path.dirname(deepspeed.__file__)


# ---------------------------------------------------------------- the plans


def plan(**kw):
    """A ztune.plan/1 document: DeepSpeed-runnable defaults, overridden by kw."""
    p = {
        "schema": "ztune.plan/1", "dp": 8, "tp": 1, "pp": 1, "virtual_stages": 1, "sequence_parallel": False,
        "zero_stage": 0, "offload": {"optimizer": "none", "params": "none"}, "micro_batch": 2, "grad_accum": 4,
        "global_batch": 64, "recompute": "none", "precision": "bf16", "schedule": "1f1b",
        "communication": {"overlap_comm": True, "reduce_bucket_elems": 2e8, "allgather_bucket_elems": 3e8,
                          "prefetch_bucket_elems": 4e7, "max_live_params": 7e8, "param_persistence_threshold": 2e5},
        "onebit_adam": {"enabled": False, "freeze_step": 0}, "sparse_attention": {"layout": "none", "block": 64},
        "zeropp": False,
    }
    for k, v in kw.items():
        if k in ("offload_optimizer", "offload_params"):
            p["offload"][k.split("_")[1]] = v
        elif k == "onebit_freeze_step":
            p["onebit_adam"] = {"enabled": True, "freeze_step": v}
        elif k == "sparse":
            p["sparse_attention"] = {"layout": v, "block": 32}
        elif k == "overlap_comm":
            p["communication"]["overlap_comm"] = v
        else:
            p[k] = v
    p["global_batch"] = p["micro_batch"] * p["grad_accum"] * p["dp"]
    return p


def catalog(kind, name):
    with open(os.path.join(DATA, kind, name + ".json")) as f:
        return json.load(f)


# (name, plan, embedded model, embedded cluster, DeepSpeed feature the case needs)
CASES = [
    ("zero0 bf16", plan(), None, None, None),
    ("zero0 fp16", plan(precision="fp16"), None, None, None),
    ("zero0 fp32", plan(precision="fp32"), None, None, None),
    ("zero1 bf16", plan(zero_stage=1), None, None, None),
    ("zero1 fp16 offload opt cpu", plan(zero_stage=1, precision="fp16", offload_optimizer="cpu"), None, None, None),
    ("zero2 fp16 full recompute", plan(zero_stage=2, precision="fp16", recompute="full"), None, None, None),
    ("zero2 offload opt cpu, no overlap", plan(zero_stage=2, offload_optimizer="cpu", overlap_comm=False), None, None,
     None),
    ("zero3 bf16", plan(zero_stage=3), None, None, None),
    ("zero3 offload opt cpu + params cpu", plan(zero_stage=3, offload_optimizer="cpu", offload_params="cpu"), None,
     None, None),
    ("zero3 offload opt nvme + params nvme", plan(zero_stage=3, offload_optimizer="nvme", offload_params="nvme"),
     "llama-7b", "dgx-a100-80gb", None),
    ("zero3 offload opt nvme, params cpu", plan(zero_stage=3, offload_optimizer="nvme", offload_params="cpu"), None,
     None, None),
    ("zero3 zero++ (dgx-a100 cluster)", plan(zero_stage=3, zeropp=True), "llama-7b", "dgx-a100-80gb", None),
    ("zero3 tp2 full recompute", plan(dp=4, tp=2, zero_stage=3, recompute="full", sequence_parallel=True), None, None,
     None),
    ("pipeline pp4 tp2 zero1 fp16 full recompute",
     plan(dp=2, tp=2, pp=4, zero_stage=1, precision="fp16", recompute="full", grad_accum=8), "llama-7b",
     "dgx-a100-80gbx16", None),
    ("pipeline pp4 tp2 zero1 full recompute, partitioned activations",
     plan(dp=2, tp=2, pp=4, zero_stage=1, recompute="full", grad_accum=8, partition_activations=True), "llama-7b",
     "dgx-a100-80gbx16", None),
    ("pipeline pp2 zero0 selective", plan(dp=4, pp=2, recompute="selective"), None, None, None),
    ("1-bit Adam fp16", plan(precision="fp16", onebit_freeze_step=400), None, None, "onebitadam"),
    ("sparse fixed", plan(sparse="fixed"), None, None, "sparse_attention"),
    ("sparse variable", plan(sparse="variable"), None, None, "sparse_attention"),
    # Hybrid sharding as MiCS: shard groups of one node of 8 on dp 32, and of two nodes (hierarchical gather).
    ("zero3 MiCS shard 8 (dgx-a100 x16)", plan(dp=32, zero_stage=3, dp_shard=8), "llama-7b", "dgx-a100-80gbx16",
     "mics"),
    ("zero3 MiCS shard 16 (dgx-a100 x16)", plan(dp=32, zero_stage=3, dp_shard=16), "llama-7b", "dgx-a100-80gbx16",
     "mics"),
]

# Plans ztune must refuse: (name, plan, text of ztune's refusal, feature). Each
# refusal is checked against the installed DeepSpeed by deepspeed_refuses().
REFUSED = [
    ("pipeline with ZeRO-2", plan(dp=4, pp=2, zero_stage=2), "ZeRO stage 0 or 1", None),
    ("1-bit Adam with ZeRO-1", plan(zero_stage=1, precision="fp16", onebit_freeze_step=400), "1-bit Adam",
     "onebitadam"),
    ("sparse bigbird", plan(sparse="bigbird"), "causal", "sparse_attention"),
    ("sparse longformer", plan(sparse="longformer"), "causal", "sparse_attention"),
]


def feature_missing(feature):
    """Why this DeepSpeed cannot take the feature, or None when it can."""
    if feature == "sparse_attention":
        removed = getattr(ds_config_module, "_REMOVED_TOP_LEVEL_CONFIG_KEYS", {})
        if "sparse_attention" in removed or not hasattr(ds_config_module, "get_sparse_attention"):
            return "this DeepSpeed has no sparse attention (removed in 0.19)"
    if feature == "mics":
        try:
            from deepspeed.runtime.zero import config as zero_config
        except ImportError:
            return "this DeepSpeed has no deepspeed.runtime.zero.config"
        model = zero_config.DeepSpeedZeroConfig
        fields = getattr(model, "model_fields", None) or getattr(model, "__fields__", {})
        if "mics_shard_size" not in fields:
            return "this DeepSpeed has no MiCS (zero_optimization.mics_shard_size; removed after the 0.18 line)"
    if feature == "onebitadam":
        if "onebitadam" not in [o.lower() for o in getattr(ds_config_module, "DEEPSPEED_OPTIMIZERS", [])]:
            return "this DeepSpeed has no OneBitAdam optimizer (removed in 0.19)"
    return None


# ------------------------------------------------------- DeepSpeed's parser


class Tracked(dict):
    """A dict that records which of its keys were read; nested dicts too."""

    def __init__(self, d, path, log):
        super().__init__({k: Tracked(v, f"{path}.{k}", log) if isinstance(v, dict) else v for k, v in d.items()})
        self.path, self.log = path, log

    def _read(self, k):
        self.log.add(f"{self.path}.{k}")

    def __getitem__(self, k):
        self._read(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self._read(k)
        return super().get(k, default)

    def __contains__(self, k):
        self._read(k)
        return super().__contains__(k)

    def keys(self):
        return TrackedKeys(self)

    def __copy__(self):
        c = Tracked({}, self.path, self.log)
        dict.update(c, self)
        return c


class TrackedKeys:
    """keys() whose `in` counts as a read (DeepSpeed writes `if KEY in d.keys()`)."""

    def __init__(self, d):
        self.d = d

    def __contains__(self, k):
        return k in self.d

    def __iter__(self):
        for k in dict.keys(self.d):
            self.d._read(k)
            yield k

    def __len__(self):
        return len(dict.keys(self.d))


class DataParallelMpu:
    """What DeepSpeedConfig asks an mpu: the data-parallel world size."""

    def __init__(self, dp):
        self.dp = dp

    def get_data_parallel_world_size(self):
        return self.dp

    def get_model_parallel_world_size(self):
        return 1


def pipeline_keys_the_engine_reads():
    """Keys of the "pipeline" section that deepspeed/runtime/pipe/*.py reads."""
    keys = set()
    pipe = os.path.join(DS_DIR, "runtime", "pipe")
    for name in os.listdir(pipe):
        if name.endswith(".py"):
            with open(os.path.join(pipe, name)) as f:
                keys |= set(re.findall(r"_config\.pipeline(?:\[|\.get\()\s*['\"](\w+)['\"]", f.read()))
    return keys


def parse(ds, dp):
    """DeepSpeedConfig of the config with dp data-parallel ranks; the keys it read."""
    read = set()
    saved = deepspeed.comm.get_rank
    deepspeed.comm.get_rank = lambda *a, **k: 0  # the parser asks for the rank before it asks the mpu
    try:
        cfg = DeepSpeedConfig(Tracked(ds, "$", read), mpu=DataParallelMpu(dp))
    finally:
        deepspeed.comm.get_rank = saved
    return cfg, read


def source(*parts):
    with open(os.path.join(DS_DIR, *parts)) as f:
        return f.read()


def deepspeed_refuses(p):
    """Evidence from the installed DeepSpeed that it cannot run the plan as meant, or None."""
    if p["pp"] > 1 and p["zero_stage"] >= 2:
        msg = "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"
        return f"runtime/pipe/engine.py asserts '{msg}'" if msg in source("runtime", "pipe", "engine.py") else None
    if p["onebit_adam"]["enabled"] and p["zero_stage"] > 0:
        msg = "1bit-Adam is not compatible with ZeRO"
        return f"runtime/engine.py asserts '{msg}'" if msg in source("runtime", "engine.py") else None
    layout = {"longformer": "bslongformer"}.get(p["sparse_attention"]["layout"], p["sparse_attention"]["layout"])
    if layout in ("bigbird", "bslongformer"):
        ds = {"train_batch_size": p["global_batch"], "train_micro_batch_size_per_gpu": p["micro_batch"],
              "sparse_attention": {"mode": layout, "block": 32, "attention": "unidirectional"}}
        cfg, _ = parse(ds, p["dp"])
        if cfg.sparse_attention.get("attention") != "unidirectional":
            return f"DeepSpeedConfig drops 'attention' for {layout}: it parses {cfg.sparse_attention}"
    return None


def check_refused(name, p, text, tmp):
    """Problems with ztune's refusal of a plan DeepSpeed cannot run."""
    evidence = deepspeed_refuses(p)
    if evidence is None:
        return ["this DeepSpeed shows no reason to refuse the plan, but ztune's rule refuses it"]
    path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".json")
    with open(path, "w") as f:
        json.dump({"schema": "ztune.planfile/1", "plan": p}, f)
    r = subprocess.run([ZTUNE, "export", "--format", "deepspeed", path], capture_output=True, text=True)
    if r.returncode != 2 or "deepspeed cannot run this plan" not in r.stderr or text not in r.stderr:
        return [f"ztune export should refuse it (exit 2, '{text}'; DeepSpeed: {evidence}), "
                f"got exit {r.returncode}: {r.stderr.strip()}"]
    return []


# ---------------------------------------------------------------- checks


# (name, plan, model, cluster): plans whose launch is checked by DeepSpeed's launcher.
LAUNCHES = [
    ("250 ranks, tp2 pp125 on 16 nodes of 16 (15 x 16 + 10)",
     plan(dp=1, tp=2, pp=125, precision="fp16", micro_batch=1, grad_accum=64), "100b", "dgx2x16"),
    ("240 ranks, tp8 pp5 dp6 on 15 nodes of 16",
     plan(dp=6, tp=8, pp=5, precision="fp16", micro_batch=1, grad_accum=8), "100b", "dgx2x16"),
]


def write_hostfile(placeholder, path):
    """Writes the hostfile the export's 'hostfile: ...' line describes."""
    m = re.search(r"hostfile: (\d+) lines, the first (\d+) '<host> slots=(\d+)' and the last '<host> slots=(\d+)'",
                  placeholder)
    if m:
        n, first, per, last = (int(g) for g in m.groups())
        slots = [per] * first + [last]
        if len(slots) != n:
            raise ValueError(f"hostfile line says {n} lines but describes {len(slots)}: {placeholder}")
    else:
        m = re.search(r"hostfile: (\d+) lines '<host> slots=(\d+)'", placeholder)
        if not m:
            raise ValueError(f"no hostfile description in: {placeholder}")
        slots = [int(m.group(2))] * int(m.group(1))
    with open(path, "w") as f:
        for i, k in enumerate(slots):
            f.write(f"node{i:02d} slots={k}\n")


def ranks_deepspeed_starts(launch, hostfile):
    """{host: [local GPU ids]} that deepspeed's runner hands its per-node launchers for this command."""
    import base64
    import shlex
    from deepspeed.launcher import runner as ds_runner
    words = shlex.split(launch)
    if words[0] != "deepspeed":
        raise ValueError(f"not a deepspeed launch: {launch}")
    args = [hostfile if w == "hostfile" else w for w in words[1:]]
    started = {}

    class Started(Exception):
        pass

    def popen(cmd, **kw):
        started["cmd"] = cmd
        raise Started()

    saved = (ds_runner.subprocess.Popen, ds_runner.subprocess.check_call, ds_runner.subprocess.check_output,
             ds_runner.PDSHRunner.backend_exists)
    ds_runner.subprocess.Popen = popen
    ds_runner.subprocess.check_call = lambda *a, **k: 0
    ds_runner.subprocess.check_output = lambda *a, **k: b"10.0.0.1\n"
    ds_runner.PDSHRunner.backend_exists = lambda self: True
    ds_log = logging.getLogger("DeepSpeed")
    ds_log.disabled = True  # the runner sets its own level and logs the whole command
    try:
        ds_runner.main(args)
    except Started:
        pass
    finally:
        ds_log.disabled = False
        (ds_runner.subprocess.Popen, ds_runner.subprocess.check_call, ds_runner.subprocess.check_output,
         ds_runner.PDSHRunner.backend_exists) = saved
    if "cmd" not in started:
        raise RuntimeError("deepspeed's runner started nothing")
    info = [w for w in started["cmd"] if isinstance(w, str) and w.startswith("--world_info=")]
    if not info:
        raise RuntimeError(f"no --world_info in the runner's command: {started['cmd']}")
    return json.loads(base64.urlsafe_b64decode(info[0].split("=", 1)[1]))


def export_deepspeed(name, p, model, cluster, tmp):
    """Writes the plan file (with the catalog's model and cluster when named) and
    exports it: (ztune's completed process, the ds_config path)."""
    planfile = {"schema": "ztune.planfile/1", "plan": p}
    if model:
        planfile["model"] = catalog("models", model)
    if cluster:
        planfile["cluster"] = catalog("clusters", cluster)
    path = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".json")
    out = path + ".ds_config.json"
    with open(path, "w") as f:
        json.dump(planfile, f)
    r = subprocess.run([ZTUNE, "export", "--format", "deepspeed", path, "--out", out], capture_output=True, text=True)
    return r, out


def check_launch(name, p, model, cluster, tmp):
    """The export's launch and hostfile, as DeepSpeed's launcher starts them: the plan's ranks, tp inside nodes."""
    r, out = export_deepspeed(name, p, model, cluster, tmp)
    if r.returncode != 0:
        return [f"ztune export failed (exit {r.returncode}): {r.stderr.strip()}"]
    lines = r.stdout.splitlines()
    launch = lines[next(i for i, l in enumerate(lines) if l.startswith("Wrote ")) + 1]
    host_line = next((l for l in lines if "hostfile:" in l), None)
    if host_line is None:
        return [f"a {p['dp'] * p['tp'] * p['pp']}-rank launch names no hostfile: {r.stdout}"]
    hostfile = os.path.join(tmp, "hostfile")
    write_hostfile(host_line, hostfile)
    world = ranks_deepspeed_starts(launch, hostfile)
    problems = []
    ranks = sum(len(g) for g in world.values())
    want = p["dp"] * p["tp"] * p["pp"]
    if ranks != want:
        problems.append(f"deepspeed's launcher starts {ranks} ranks ({ {h: len(g) for h, g in world.items()} }), "
                        f"the plan has {want}")
    for host, gpus in world.items():
        if len(gpus) % p["tp"]:
            problems.append(f"{host} starts {len(gpus)} ranks, not a multiple of tp {p['tp']}")
    try:
        parse(json.load(open(out)), p["dp"])
    except Exception as e:
        problems.append(f"DeepSpeedConfig rejects its ds_config: {type(e).__name__}: {e}")
    return problems


def check_case(name, p, model, cluster, tmp):
    """List of problems with the export of this plan; empty when DeepSpeed takes it as meant."""
    r, out = export_deepspeed(name, p, model, cluster, tmp)
    if r.returncode != 0:
        return [f"ztune export failed (exit {r.returncode}): {r.stderr.strip()}"]
    with open(out) as f:
        ds = json.load(f)

    problems = []
    try:
        cfg, read = parse(ds, p["dp"])
    except Exception as e:
        return [f"DeepSpeedConfig rejects it: {type(e).__name__}: {e}"]

    # Keys of plain-dict sections that the parser never read are ignored by it.
    later = {"pipeline", "optimizer"}  # read after parsing: checked below
    pydantic_sections = {"zero_optimization", "fp16", "bf16"}  # extra="forbid": unknown keys already rejected
    for key, value in ds.items():
        if f"$.{key}" not in read:
            problems.append(f"top-level key '{key}' is never read by DeepSpeedConfig")
        if key in later or key in pydantic_sections or not isinstance(value, dict):
            continue
        for sub in value:
            if f"$.{key}.{sub}" not in read:
                problems.append(f"'{key}.{sub}' is never read by DeepSpeedConfig (silently ignored)")
    if "pipeline" in ds:
        engine_keys = pipeline_keys_the_engine_reads()
        for sub in ds["pipeline"]:
            if sub not in engine_keys:
                problems.append(f"'pipeline.{sub}' is read by no code in deepspeed/runtime/pipe "
                                f"(it reads {sorted(engine_keys)}): silently ignored")
    if "optimizer" in ds:
        from deepspeed.runtime.fp16.onebit.adam import OnebitAdam
        if cfg.optimizer_name != "onebitadam":
            problems.append(f"optimizer type parses as {cfg.optimizer_name!r}, not DeepSpeed's onebitadam")
        accepted = set(inspect.signature(OnebitAdam.__init__).parameters) - {"self", "params", "deepspeed"}
        for k in cfg.optimizer_params:
            if k not in accepted:
                problems.append(f"optimizer.params.{k} is not an argument of OnebitAdam {sorted(accepted)}")

    # The values DeepSpeed ends up with against the plan's.
    def expect(what, got, want):
        if got != want:
            problems.append(f"{what}: DeepSpeed has {got!r}, the plan means {want!r}")

    c = p["communication"]
    z = cfg.zero_config
    expect("train_batch_size", cfg.train_batch_size, p["global_batch"])
    expect("micro batch per GPU", cfg.train_micro_batch_size_per_gpu, p["micro_batch"])
    expect("gradient accumulation", cfg.gradient_accumulation_steps, p["grad_accum"])
    expect("ZeRO stage", int(cfg.zero_optimization_stage), p["zero_stage"])
    if p["zero_stage"] >= 1:
        expect("reduce_bucket_size (elements)", z.reduce_bucket_size, int(c["reduce_bucket_elems"]))
        expect("allgather_bucket_size (elements)", z.allgather_bucket_size, int(c["allgather_bucket_elems"]))
        expect("overlap_comm", z.overlap_comm, c["overlap_comm"])
    if p["zero_stage"] == 3:
        expect("stage3_prefetch_bucket_size", z.prefetch_bucket_size, int(c["prefetch_bucket_elems"]))
        expect("stage3_max_live_parameters", z.max_live_parameters, int(c["max_live_params"]))
        expect("stage3_max_reuse_distance", z.max_reuse_distance, int(c.get("max_reuse_distance", 1e9)))
        expect("stage3_param_persistence_threshold", z.param_persistence_threshold,
               int(c["param_persistence_threshold"]))
    for what, section in (("optimizer", z.offload_optimizer), ("params", z.offload_param)):
        want = p["offload"][what]
        got = "none" if section is None else getattr(section.device, "value", section.device)
        expect(f"offload {what} device", got, want)
        if want == "nvme" and section is not None and not section.nvme_path:
            problems.append(f"offload {what} to nvme without an nvme_path")
    expect("fp16 enabled", cfg.float16_config.enabled, p["precision"] == "fp16")
    expect("bf16 enabled", cfg.bfloat16_config.enabled, p["precision"] == "bf16")
    if p["precision"] == "fp16":
        expect("fp16 loss_scale (0 = dynamic, as the plan's fp16 means)", cfg.float16_config.loss_scale, 0)
    if p["recompute"] == "full":
        if "activation_checkpointing" not in ds:
            problems.append("full recomputation but no activation_checkpointing section")
        else:
            # ZeRO-R's Pa is the plan's own choice (plan.partition_activations, tp >= 2).
            expect("partition_activations (split checkpoints over the tp group)",
                   cfg.activation_checkpointing_config.partition_activations, p.get("partition_activations", False))
    if p["pp"] > 1:
        expect("pipeline activation_checkpoint_interval", cfg.pipeline["activation_checkpoint_interval"],
               1 if p["recompute"] == "full" else 0)
    if p["zeropp"]:
        expect("zero_quantized_weights", z.zero_quantized_weights, True)
        expect("zero_quantized_gradients", z.zero_quantized_gradients, True)
        want = catalog("clusters", cluster)["node"]["gpus"] if cluster else None
        if want is not None:
            expect("zero_hpz_partition_size (GPUs per node)", z.zero_hpz_partition_size, want)
    if p.get("dp_shard"):
        expect("mics_shard_size (ZeRO-3 shard group)", z.mics_shard_size, p["dp_shard"])
        gpn = catalog("clusters", cluster)["node"]["gpus"] if cluster else 8
        expect("mics_hierarchical_params_gather (a shard group spanning nodes)", z.mics_hierarchical_params_gather,
               p["dp_shard"] * p["tp"] > gpn)
    if p["onebit_adam"]["enabled"]:
        expect("1-bit Adam freeze_step", cfg.optimizer_params.get("freeze_step"), p["onebit_adam"]["freeze_step"])
    layout = p["sparse_attention"]["layout"]
    if layout != "none":
        sa = cfg.sparse_attention
        expect("sparse_attention mode", sa["mode"], {"longformer": "bslongformer"}.get(layout, layout))
        expect("sparse_attention block", sa["block"], p["sparse_attention"]["block"])
        # ztune trains causal models: the layout DeepSpeed builds must be unidirectional.
        expect("sparse_attention attention (causal)", sa.get("attention"), "unidirectional")
    return problems


def main():
    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    import torch
    print(f"DeepSpeed {deepspeed.__version__}, torch {torch.__version__}")
    counts = {"ok": 0, "FAIL": 0, "SKIP": 0}

    def report(name, skip_reason, check):
        """Runs `check` (a list of problems) unless the feature is missing; prints the outcome."""
        if skip_reason:
            counts["SKIP"] += 1
            print(f"SKIP {name}: {skip_reason}")
            return
        problems = check()
        outcome = "FAIL" if problems else "ok"
        counts[outcome] += 1
        print(f"{outcome:4s} {name}")
        for pr in problems:
            print(f"     {pr}")

    with tempfile.TemporaryDirectory() as tmp:
        for name, p, model, cluster, feature in CASES:
            why = feature_missing(feature)
            report(name, why, lambda: check_case(name, copy.deepcopy(p), model, cluster, tmp))
        for name, p, model, cluster in LAUNCHES:
            report("launch " + name, None, lambda: check_launch(name, copy.deepcopy(p), model, cluster, tmp))
        for name, p, text, feature in REFUSED:
            why = feature_missing(feature)
            report("refuse " + name, why, lambda: check_refused(name, copy.deepcopy(p), text, tmp))
    print(f"{counts['ok']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped")
    return 0 if counts["FAIL"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
