#!/bin/sh
# The planner under a real X server (Xvfb): open the window, run the default
# search, select the best plan, save the window, and check the PNG is a real
# picture of the right size; then the screenshot set (--screenshot-set).
# Exit 77 (skipped) when xvfb-run is missing.
# ZTUNE_REFRESH_SCREENSHOT=1 also copies it to docs/planner.png (the README's).
#   screenshot_test.sh PLANNER OUT.png SOURCE_DIR
set -eu
planner=$1
out=$2
src=$3
if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "xvfb-run not found: skipping the screenshot test"
  exit 77
fi
rm -f "$out"
# A private results database for this run, and the default inputs (no saved session is read in screenshot mode).
export XDG_DATA_HOME="$(dirname "$out")/screenshot-xdg"
rm -rf "$XDG_DATA_HOME"  # fresh each run: the history picture shows this run's searches only
export QT_FONT_DPI=96
export QT_ENABLE_HIGHDPI_SCALING=0
unset QT_QPA_PLATFORM
xvfb-run -a -s "-screen 0 1920x1200x24" "$planner" --screenshot "$out"
test -s "$out" || { echo "no screenshot written to $out"; exit 1; }
# PNG signature, then the IHDR width and height (big-endian) at bytes 16..23.
sig=$(od -An -tx1 -N8 "$out" | tr -d ' \n')
[ "$sig" = "89504e470d0a1a0a" ] || { echo "$out is not a PNG ($sig)"; exit 1; }
width=$(od -An -tu1 -j16 -N4 "$out" | awk '{print $1*16777216 + $2*65536 + $3*256 + $4}')
height=$(od -An -tu1 -j20 -N4 "$out" | awk '{print $1*16777216 + $2*65536 + $3*256 + $4}')
bytes=$(wc -c < "$out")
echo "screenshot: ${width}x${height}, $bytes bytes"
[ "$width" -ge 1200 ] && [ "$height" -ge 800 ] || { echo "screenshot too small"; exit 1; }
# A blank or nearly blank window compresses to a few kB; the planner with its
# table, three charts and a timeline does not.
[ "$bytes" -gt 60000 ] || { echo "screenshot looks empty ($bytes bytes)"; exit 1; }
if [ "${ZTUNE_REFRESH_SCREENSHOT:-0}" = 1 ]; then
  cp "$out" "$src/docs/planner.png"
  echo "refreshed $src/docs/planner.png"
fi

# Nothing of the window scrolls sideways in its 1600-pixel frame: the plan
# table's last column (the iteration time) and the input panel's line ends stay
# in view with the widest cells the searches give (interleaved schedules and
# block recomputation of the 1T on Selene; Llama 3.1 405B on 1024 H100, whose
# long memory-margin note and dp256 layouts had scrolled both sideways).
for pair in "selene-3072 1t" "dgx-h100x128 llama-405b" "dgx2x16 100b"; do
  set -- $pair
  xvfb-run -a -s "-screen 0 1920x1200x24" "$planner" --cluster "$1" --model "$2" \
    --screenshot "$(dirname "$out")/fit-$2.png" 2> "$(dirname "$out")/fit-$2.err" || true
  if grep "scrolls sideways" "$(dirname "$out")/fit-$2.err"; then
    echo "$2 on $1: part of the window is out of view"; exit 1
  fi
  test -s "$(dirname "$out")/fit-$2.png" || { echo "$2 on $1: no screenshot written"; exit 1; }
done
# A 1280-pixel window (X11's -geometry): the plan table hides the columns
# least needed rather than scroll (audit50gui M7), and names them.
xvfb-run -a -s "-screen 0 1920x1200x24" "$planner" -geometry 1280x800 --cluster dgx-h100x128 --model llama-405b \
  --screenshot "$(dirname "$out")/fit-1280.png" 2> "$(dirname "$out")/fit-1280.err" || true
if grep "scrolls sideways" "$(dirname "$out")/fit-1280.err"; then
  echo "llama-405b at 1280 px: part of the window is out of view"; exit 1
fi
test -s "$(dirname "$out")/fit-1280.png" || { echo "llama-405b at 1280 px: no screenshot written"; exit 1; }

# The screenshot set (issue 23): the default search's views, then a CPU
# cluster's, whose Run tab trains the plan for real. Each tour must write its
# files, each a real picture.
set_dir="$(dirname "$out")/screenshot-set"
rm -rf "$set_dir"
xvfb-run -a -s "-screen 0 1920x1200x24" "$planner" --screenshot-set "$set_dir/default"
xvfb-run -a -s "-screen 0 1920x1200x24" "$planner" --cluster local-cpu --model tiny --db "$set_dir/cpu.db" \
  --screenshot-set "$set_dir/cpu"
# --db: the CPU tour's search and its run are stored there (its messages had
# named a --db the planner did not have).
ztune="$(dirname "$planner")/../cli/ztune"
listed=$("$ztune" history --db "$set_dir/cpu.db")
echo "$listed" | grep -q "tiny on local-cpu" || { echo "--db $set_dir/cpu.db holds no search:"; echo "$listed"; exit 1; }
echo "$listed" | grep -q "^  r1 " || { echo "--db $set_dir/cpu.db holds no run:"; echo "$listed"; exit 1; }
# The timeline of an interleaved plan with 64 or more micro-batches (issue 23):
# the default search has none (V100), GPT-3 175B on 128 A100 ranks hundreds.
xvfb-run -a -s "-screen 0 1920x1200x24" "$planner" --cluster dgx-a100-80gbx16 --model gpt3-175b \
  --screenshot-set "$set_dir/interleaved"
# Nothing fits (1T on one V100 workstation): the table shows the closest plans
# and the panel what would make one fit; the tour stops after its search.png.
xvfb-run -a -s "-screen 0 1920x1200x24" "$planner" --cluster v100-workstation --model 1t \
  --screenshot-set "$set_dir/nofit" || true
# Without --db the screenshots kept their searches in a database of their own:
# the default one (under XDG_DATA_HOME) was neither created nor written.
[ ! -e "$XDG_DATA_HOME/ztune/results.db" ] || {
  echo "a screenshot run without --db wrote the user's default database $XDG_DATA_HOME/ztune/results.db"; exit 1; }
for f in default/search.png default/compare.png default/stale.png default/history.png cpu/run.png nofit/search.png \
         interleaved/timeline-interleaved.png; do
  test -s "$set_dir/$f" || { echo "the screenshot set lacks $f"; exit 1; }
  bytes=$(wc -c < "$set_dir/$f")
  [ "$bytes" -gt 20000 ] || { echo "$set_dir/$f looks empty ($bytes bytes)"; exit 1; }
done
echo "screenshot set: $(ls "$set_dir"/default "$set_dir"/cpu "$set_dir"/nofit "$set_dir"/interleaved | grep -c png) pictures"
if [ "${ZTUNE_REFRESH_SCREENSHOT:-0}" = 1 ]; then
  mkdir -p "$src/docs/screenshots"
  for f in search compare stale history; do cp "$set_dir/default/$f.png" "$src/docs/screenshots/$f.png"; done
  cp "$set_dir/cpu/run.png" "$src/docs/screenshots/run.png"
  cp "$set_dir/nofit/search.png" "$src/docs/screenshots/nofit.png"
  cp "$set_dir/interleaved/timeline-interleaved.png" "$src/docs/screenshots/timeline.png"
  echo "refreshed $src/docs/screenshots/"
fi

# A refused input in a headless screenshot run is said on stderr, as `ztune`
# says it (it was only inside the picture), with exit 1.
err="$(dirname "$out")/screenshot-refused.err"
rc=0
xvfb-run -a -s "-screen 0 1920x1200x24" "$planner" --cluster no-such-cluster \
  --screenshot "$(dirname "$out")/refused.png" 2>"$err" || rc=$?
[ "$rc" = 1 ] || { echo "a refused cluster exited $rc, expected 1"; exit 1; }
grep -q "ztune-planner: error: --cluster no-such-cluster: not a file and not a catalog cluster" "$err" || {
  echo "the refusal is not on stderr:"; cat "$err"; exit 1; }
