"""Each memory line's prediction beside what it held at the measured peak.

usage: memory_lines.py RECORD.json PREDICT.json
RECORD is a ztune-worker run record (its rank with the highest peak, whose
at_peak lines sum to that peak); PREDICT is `ztune predict --json` of the same
plan. Prints one table, GiB; lines the tracker does not see (the CUDA runtime,
the allocator's fragmentation) have no measured column, and the workspace
line's prediction also holds cuBLAS's workspace and the CUDA kernels' scratch,
which the tracker does not see either.
"""
import json
import sys


def main():
    record, predicted = (json.load(open(path)) for path in sys.argv[1:3])
    rank = max(record["memory"], key=lambda m: m["peak_bytes"])
    at = rank.get("at_peak")
    gpu = predicted["memory"]["gpu"]
    gib = 2.0 ** 30
    print(f"memory at rank {rank['rank']}'s peak (GiB)   predicted   measured")
    tracked = 0.0
    for key, value in gpu.items():
        line = key[:-len("_bytes")] if key.endswith("_bytes") else key
        if line in ("total", "capacity"):
            continue
        measured = f"{at[line] / gib:10.3f}" if at is not None and line in at else "         -"
        if at is not None and line in at:
            tracked += value
        print(f"  {line:28s} {value / gib:11.3f} {measured}")
    peak = rank["peak_bytes"]
    print(f"  {'tracked lines':28s} {tracked / gib:11.3f} {peak / gib:10.3f}  ({100 * (tracked - peak) / peak:+.1f}%)"
          if peak > 0 else "  (no peak recorded)")
    print(f"  {'predicted total':28s} {gpu['total_bytes'] / gib:11.3f}  (with the untracked lines)")


if __name__ == "__main__":
    main()
