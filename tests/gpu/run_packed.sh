#!/bin/sh
# On a GPU machine, from the source tree: unpacks .gpu/gpu-check.tar.xz
# (make gpu-pack) into GPU_PACK_DIR (default /tmp/trainsim-gpu) and runs
# the check from it; arguments go to gpu_check.py (--out DIR, --sections ...).
set -eu
pack=.gpu/gpu-check.tar.xz
dir=${GPU_PACK_DIR:-/tmp/trainsim-gpu}
[ -f "$pack" ] || { echo "run_packed: no $pack here: make gpu-pack on the build machine" >&2; exit 2; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)  # the links below name their targets from anywhere
rm -rf "$dir/build" "$dir/data" "$dir/lib" "$dir/missing" "$dir/commit"  # an earlier pack's
tar -C "$dir" -xJf "$pack"
# A library the binaries need that this machine lacks: the pack's copy,
# alone on the loader's path (each round finds those the last one's need).
binaries="tools/trainsim tests/gpu_tests tests/exec_tests tests/tools_tests tests/bench/cuda_step_bench"
mkdir -p "$dir/missing"
export LD_LIBRARY_PATH="$dir/missing${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for round in 1 2 3 4 5; do
  missing=$(for f in $binaries; do ldd "$dir/build/$f" 2>/dev/null || true; done |
            awk '$2 == "=>" && $3 == "not" {print $1}' | sort -u)
  [ -n "$missing" ] || break
  for lib in $missing; do
    [ -f "$dir/lib/$lib" ] || break 2
    ln -sf "$dir/lib/$lib" "$dir/missing/$lib"
    echo "run_packed: $lib from the pack (this machine lacks it; round $round)" >&2
  done
done
# cuBLAS and NCCL the binaries open when first used (not in ldd's list):
# CUDA's own folder on the loader's path where the loader does not find them.
found() {
  { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | grep -q "$1 " && return 0
  for d in $(echo "${LD_LIBRARY_PATH:-}" | tr : ' '); do [ -e "$d/$1" ] && return 0; done
  return 1
}
for lib in libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  if ! found "$lib" && [ -e "/usr/local/cuda/lib64/$lib" ]; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:/usr/local/cuda/lib64"
    echo "run_packed: /usr/local/cuda/lib64 on the loader's path (for $lib)" >&2
  fi
  found "$lib" || echo "run_packed: no $lib here: what needs it will say so" >&2
done
unresolved=$(for f in $binaries; do ldd "$dir/build/$f" 2>&1 || true; done | grep "not found" | sort -u)
if [ -n "$unresolved" ]; then
  echo "run_packed: the packed binaries cannot start here (neither this machine nor the pack has these):" >&2
  echo "$unresolved" >&2
  exit 2
fi
packed=$(ls "$dir/missing" | tr '\n' ' ')
exec python3 tests/gpu/gpu_check.py --build "$dir/build" --data-dir "$dir/data" --commit "$(cat "$dir/commit")" \
  --packed-libraries "${packed% }" "$@"
