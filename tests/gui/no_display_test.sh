#!/bin/sh
# Issue 23: without a display the planner answers --help and --version (exit 0)
# and otherwise says that there is no display (exit 2), instead of Qt's abort
# (rc 134).
#   no_display_test.sh PLANNER
set -u
planner=$1
unset DISPLAY WAYLAND_DISPLAY QT_QPA_PLATFORM
out=$("$planner" --help 2>&1); rc=$?
[ "$rc" -eq 0 ] || { echo "--help: exit $rc: $out"; exit 1; }
echo "$out" | grep -q -- "--cluster" || { echo "--help does not list --cluster: $out"; exit 1; }
out=$("$planner" --version 2>&1); rc=$?
[ "$rc" -eq 0 ] || { echo "--version: exit $rc"; exit 1; }
out=$("$planner" 2>&1); rc=$?
[ "$rc" -eq 2 ] || { echo "no display: exit $rc (expected 2): $out"; exit 1; }
echo "$out" | grep -q "no display" || { echo "no display: message missing: $out"; exit 1; }
echo "ok"
