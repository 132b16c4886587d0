#!/usr/bin/env python3
"""The rooms' import rules for calibration (docs/design.md, "Rooms and who may
import whom"): model/ never includes calibration; calibration's fit and loop
include only model/ and calibration/ headers (no tuner, simulator, executor);
only calibration/bench/ includes the executor. Exit 1 naming each offending
line."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
include = re.compile(r'^\s*#\s*include\s+[<"](ztune/[a-z_]+)/')
rules = [
    # (folder, allowed ztune/<module>/ prefixes)
    ("model", {"ztune/model"}),
    ("calibration/fit", {"ztune/model", "ztune/calibration"}),
    ("calibration/loop", {"ztune/model", "ztune/calibration"}),
    ("calibration/bench", {"ztune/model", "ztune/calibration", "ztune/executor", "ztune/kernels"}),
]
bad = []
for folder, allowed in rules:
    for f in sorted((root / folder).rglob("*")):
        if f.suffix not in (".cpp", ".hpp", ".h", ".cu", ".cuh"):
            continue
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = include.match(line)
            if m and m.group(1) not in allowed:
                bad.append(f"{f.relative_to(root)}:{n}: {folder}/ may not include {m.group(1)}/ ({line.strip()})")
if not (root / "calibration").is_dir():
    bad.append(f"{root}: no calibration/ folder")
for b in bad:
    print(b)
print(f"import rules: {'ok' if not bad else str(len(bad)) + ' violation(s)'}")
sys.exit(1 if bad else 0)
