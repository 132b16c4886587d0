#!/usr/bin/env bash
# Rehearses the bare GPU machine here (issue 24): a Debian 12 root made with
# debootstrap that holds only what a GPU image is assumed to have besides CUDA — a C++
# compiler, make, CMake, ninja and Python — with this machine's CUDA toolkit
# bind-mounted read-only at /usr/local/cuda-*, the working tree and the dependency
# bundle (.gpu-bundle/, scripts/gpu-check.sh --prepare) copied in as the device tool
# would carry them, and nothing else. In it, `scripts/gpu-check.sh --build-only` unpacks
# the bundle into its private prefix, configures and builds the full project (GUI off,
# sm_90) and checks that every GPU test skips (no device) and that mpirun works.
#
#   scripts/gpu-rehearsal.sh [OUTDIR]   # logs to OUTDIR (default /var/tmp/ztune-rehearsal-out)
#
# Environment:
#   ZTUNE_BARE_ROOT=/var/tmp/ztune-bare  the root (made once, reused; outside the repo)
#   ZTUNE_REHEARSAL_TREE=worktree|head   what is copied in: the working tree as the device
#                                        tool sends it (tracked and untracked-not-ignored
#                                        files; default) or the last commit (git archive HEAD)
#   ZTUNE_GPU_WERROR=ON                  passed on (the root's g++ 12 is CI's compiler)
# Needs root (debootstrap, chroot, mount). The build runs under nice -n 10.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
R=${ZTUNE_BARE_ROOT:-/var/tmp/ztune-bare}
OUTDIR=${1:-/var/tmp/ztune-rehearsal-out}
TREE=${ZTUNE_REHEARSAL_TREE:-worktree}
[[ $(id -u) == 0 ]] || { echo "needs root (debootstrap, chroot, mount)"; exit 1; }
[[ -d .gpu-bundle/debs ]] || { echo "no .gpu-bundle: run scripts/gpu-check.sh --prepare first"; exit 1; }
case "$R" in "$REPO"*|/) echo "the root must lie outside the repository: $R"; exit 1;; esac

# The mirror apt here is configured with (deb822 sources first, then sources.list).
mirror() {
  local m=""
  if compgen -G "/etc/apt/sources.list.d/*.sources" >/dev/null; then
    m=$(awk '/^URIs:/ {u=$2} /^Suites:/ && / bookworm( |$)/ {print u; exit}' /etc/apt/sources.list.d/*.sources)
  fi
  [[ -n "$m" ]] || m=$(awk '$1 == "deb" && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  echo "${m:-http://deb.debian.org/debian}"
}

# What the GPU image is assumed to hold besides CUDA and PyTorch: nvcc needs a host
# compiler (g++, with binutils), make is there with it, and Python; CMake and ninja are
# the PyPI ones (the image lists them among its Python packages, see
# /work/.library/device/KINDS.md), so the root takes them from PyPI wheels too, unpacked
# into /opt/pytools, not Debian's cmake 3.25 (which also pulls in ICU).
BASE_PKGS=(g++ make python3)
WHEELS=${ZTUNE_REHEARSAL_WHEELS:-/var/tmp/ztune-wheels}

if [[ ! -f "$R/.ztune-base" ]]; then
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
  M=$(mirror)
  echo "debootstrap --variant=minbase bookworm $R $M"
  rm -rf "$R"
  debootstrap --variant=minbase bookworm "$R" "$M" >/var/tmp/ztune-debootstrap.log 2>&1 ||
    { tail -20 /var/tmp/ztune-debootstrap.log; exit 1; }
  cp /etc/resolv.conf "$R/etc/resolv.conf"
  chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends ${BASE_PKGS[*]} >/dev/null && apt-get clean"
  touch "$R/.ztune-base"
fi
if chroot "$R" dpkg-query -W cmake >/dev/null 2>&1; then  # a root made before CMake came from PyPI
  chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    sh -c "apt-get purge -y -qq cmake ninja-build >/dev/null && apt-get autoremove -y -qq --purge >/dev/null"
fi
if [[ ! -x "$R/opt/pytools/bin/cmake" ]]; then
  if ! compgen -G "$WHEELS/cmake-*.whl" >/dev/null || ! compgen -G "$WHEELS/ninja-*.whl" >/dev/null; then
    mkdir -p "$WHEELS"
    python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --python-version 3.11 -d "$WHEELS" cmake ninja
  fi
  rm -rf "$R/opt/pytools" && mkdir -p "$R/opt/pytools/bin" "$R/opt/pytools/wheels"
  for w in "$WHEELS"/cmake-*.whl "$WHEELS"/ninja-*.whl; do python3 -m zipfile -e "$w" "$R/opt/pytools/wheels"; done
  W=/opt/pytools/wheels
  chmod +x "$R$W"/cmake/data/bin/* "$R$W"/ninja-*.data/scripts/ninja
  for b in cmake ctest cpack; do ln -sfn "$W/cmake/data/bin/$b" "$R/opt/pytools/bin/$b"; done
  ln -sfn "$(cd "$R" && ls -d .$W/ninja-*.data/scripts/ninja | cut -c2-)" "$R/opt/pytools/bin/ninja"
fi

# The root must stay bare: none of the project's dependencies installed in it.
leaked=$(chroot "$R" dpkg-query -W -f='${Package}\n' 2>/dev/null |
         grep -E '^(libopenmpi|openmpi|libboost|libeigen|nlohmann|libsqlite3-dev|libcli11|catch2|libpmix|libhwloc|libevent|libicu)' || true)
[[ -z "$leaked" ]] || { echo "the root is not bare, it has: $leaked"; exit 1; }
echo "bare root $R: $(chroot "$R" dpkg-query -W | wc -l) Debian packages (minbase + ${BASE_PKGS[*]}), $(chroot "$R" /opt/pytools/bin/cmake --version | head -1), ninja $(chroot "$R" /opt/pytools/bin/ninja --version)"

MOUNTS=()
cleanup() {
  local i
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount "${MOUNTS[i]}" 2>/dev/null || umount -l "${MOUNTS[i]}" || true; done
}
trap cleanup EXIT
bind() {  # source, target inside the root, [ro]
  mkdir -p "$R$2"
  mount --bind "$1" "$R$2" && MOUNTS+=("$R$2")
  [[ "${3:-}" != ro ]] || mount -o remount,bind,ro "$R$2"
}
mount -t proc proc "$R/proc" && MOUNTS+=("$R/proc")
bind /dev /dev
mount -t tmpfs -o size=1g tmpfs "$R/dev/shm" && MOUNTS+=("$R/dev/shm")  # Open MPI's shared-memory transport
# This machine's CUDA toolkit, read-only, at the same paths (/usr/local/cuda is a link).
for d in /usr/local/cuda-*; do [[ -d "$d" && ! -L "$d" ]] && bind "$d" "$d" ro; done
if [[ -L /usr/local/cuda ]]; then ln -sfn "$(readlink /usr/local/cuda)" "$R/usr/local/cuda"; fi

# The tree as the device tool sends it, plus the carried bundle.
rm -rf "$R/work/ztune" "$R/work/out" && mkdir -p "$R/work/ztune" "$R/work/out"
if [[ "$TREE" == head ]]; then
  git archive HEAD | tar -x -C "$R/work/ztune"
  echo "tree: git archive HEAD ($(git rev-parse --short HEAD))"
else
  git ls-files -co --exclude-standard -z | xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
    tar -c --null -T - | tar -x -C "$R/work/ztune"
  echo "tree: the working tree at $(git rev-parse --short HEAD) (tracked and untracked-not-ignored files)"
fi
cp -r .gpu-bundle "$R/work/ztune/"
echo "carried: $(du -sm "$R/work/ztune" | cut -f1) MiB (bundle $(du -sm .gpu-bundle | cut -f1) MiB)"

t0=$(date +%s)
set +e
chroot "$R" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/opt/pytools/bin:/usr/local/cuda/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  ZTUNE_GPU_WERROR="${ZTUNE_GPU_WERROR:-OFF}" ${ZTUNE_GPU_TARGETS:+ZTUNE_GPU_TARGETS="$ZTUNE_GPU_TARGETS"} \
  nice -n 10 bash -c 'cd /work/ztune && scripts/gpu-check.sh --build-only /work/out'
rc=$?
set -e
wall=$(( $(date +%s) - t0 ))
# CPU seconds of everything the chroot ran (the children's line of `times`): with the
# build's critical path, what estimates the build on more cores.
times >"$R/work/out/.times"  # a builtin with a redirection runs in this shell, not a fork
cpu=$(tail -1 "$R/work/out/.times" | awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } printf "%.0f", t }')
rm -rf "$OUTDIR" && mkdir -p "$OUTDIR" && cp -r "$R/work/out/." "$OUTDIR/"
echo "rehearsal: rc $rc, $wall s wall, $cpu s CPU on $(nproc) cores (load $(cut -d' ' -f1-3 /proc/loadavg)); logs in $OUTDIR" |
  tee "$OUTDIR/rehearsal.txt"
exit $rc
