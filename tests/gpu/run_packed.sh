#!/bin/sh
# On a GPU machine, from the source tree: unpacks .gpu/gpu-check.tar.xz
# (make gpu-pack) into GPU_PACK_DIR (default /tmp/trainsim-gpu) and runs
# the check from it; arguments go to gpu_check.py (--out DIR, --sections ...).
set -eu
pack=.gpu/gpu-check.tar.xz
dir=${GPU_PACK_DIR:-/tmp/trainsim-gpu}
[ -f "$pack" ] || { echo "run_packed: no $pack here: make gpu-pack on the build machine" >&2; exit 2; }
mkdir -p "$dir"
tar -C "$dir" -xJf "$pack"
exec python3 tests/gpu/gpu_check.py --build "$dir/build" --data-dir "$dir/data" --commit "$(cat "$dir/commit")" "$@"
