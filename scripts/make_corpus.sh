#!/usr/bin/env bash
# Builds the executor's small training corpus from public-domain text shipped by a
# Debian package: the King James Bible (Debian package bible-kjv, whose text is in
# the public domain) — Genesis and Exodus for training, Psalms 1-20 for validation.
# Tokens are bytes (vocabulary 256, the tiny model's), stored as little-endian
# uint16 as the executor's token file reader expects. Deterministic: rerunning it
# reproduces the committed files byte for byte.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v bible >/dev/null || { echo "make_corpus: needs the 'bible' program: apt-get install bible-kjv" >&2; exit 2; }
out=data/corpus
mkdir -p "$out"
# `bible -f` prints "Ge1:1 text"; keep the text, one verse per line.
bible -f "Genesis 1:1-50:26" "Exodus 1:1-40:38" | sed -E 's/^[^ ]+ //' > "$out/kjv.train.txt.tmp"
bible -f "Psalms 1:1-20:9" | sed -E 's/^[^ ]+ //' > "$out/kjv.val.txt.tmp"
/usr/bin/python3 - "$out" <<'PY'
import sys, numpy as np
out = sys.argv[1]
for split in ("train", "val"):
    data = open(f"{out}/kjv.{split}.txt.tmp", "rb").read()
    np.frombuffer(data, dtype=np.uint8).astype("<u2").tofile(f"{out}/kjv.{split}.bin")
    print(f"{out}/kjv.{split}.bin: {len(data)} byte tokens")
PY
rm -f "$out"/kjv.*.txt.tmp
