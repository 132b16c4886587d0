#!/usr/bin/env python3
"""The rooms' import rules (docs/design.md, "Rooms and who may import whom"):
each folder includes only the ztune/<room>/ headers its row of the table
allows, so the arrows point one way (vocab <- model <- validation <- tuner;
model <- simulator <- tuner <- cli/gui; model <- calibration; vocab, kernels
<- executor <- calibration/bench). The CMake targets link the same libraries
(ztune_check_links in the top-level CMakeLists.txt). Exit 1 naming each offending line."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[1])
include = re.compile(r'^\s*#\s*include\s+[<"](ztune/[a-z_]+)/')


def rooms(*names):
    return {"ztune/" + n for n in names}


rules = [
    # (folder, the ztune/<room>/ headers it may include)
    ("vocab", rooms("vocab")),
    ("model", rooms("vocab", "model")),
    ("validation", rooms("vocab", "model", "validation")),
    ("kernels", rooms("kernels")),
    ("simulator", rooms("vocab", "model", "simulator")),
    ("tuner", rooms("vocab", "model", "validation", "simulator", "tuner")),
    ("executor", rooms("vocab", "kernels", "executor")),
    ("calibration/fit", rooms("vocab", "model", "calibration")),
    ("calibration/loop", rooms("vocab", "model", "calibration")),
    ("calibration/bench", rooms("vocab", "model", "calibration", "executor", "kernels")),
    # The shells reach the simulator and validation through tuner/planning.hpp.
    ("cli", rooms("vocab", "model", "tuner", "calibration")),
    ("gui/app", rooms("vocab", "model", "tuner", "calibration", "gui")),
    ("gui/src", rooms("vocab", "model", "validation", "simulator", "tuner", "calibration", "gui")),
    ("gui/include", rooms("vocab", "model", "validation", "simulator", "tuner", "calibration", "gui")),
    ("bench", rooms("vocab", "model", "simulator", "tuner", "kernels")),
    ("fuzz", rooms("vocab", "model", "calibration")),
]
bad = []
for folder, allowed in rules:
    if not (root / folder).is_dir():
        bad.append(f"{root}: no {folder}/ folder")
        continue
    for f in sorted((root / folder).rglob("*")):
        if f.suffix not in (".cpp", ".hpp", ".h", ".cu", ".cuh"):
            continue
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            m = include.match(line)
            if m and m.group(1) not in allowed:
                bad.append(f"{f.relative_to(root)}:{n}: {folder}/ may not include {m.group(1)}/ ({line.strip()})")
for b in bad:
    print(b)
print(f"import rules: {'ok' if not bad else str(len(bad)) + ' violation(s)'}")
sys.exit(1 if bad else 0)
