#!/bin/sh
# `make gpu-check`'s script on a machine without a GPU, nvidia-smi stood in
# for: every section runs, each command failing without a GPU is reported as
# a line of the report, and the script neither stops on a Python error nor
# claims success (exit 1). Usage: gpu_check_smoke.sh SOURCE_DIR BUILD_DIR
set -u
source_dir=$1
build_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
printf '#!/bin/sh\necho "Stand-in GPU, 0.0, 1 MiB"\n' > "$work/bin/nvidia-smi"
chmod +x "$work/bin/nvidia-smi"
PATH="$work/bin:$PATH" python3 "$source_dir/tests/gpu/gpu_check.py" --build "$build_dir" --out "$work/out" \
  > "$work/log" 2>&1
status=$?
report="$work/out/gpu-check.md"
fail() { echo "gpu_check_smoke: $1"; cat "$work/log"; exit 1; }
[ "$status" -eq 1 ] || fail "exit $status, not 1 (commands fail without a GPU)"
! grep -q Traceback "$work/log" || fail "a Python error"
for section in "## Tests" "## Every strategy on four workers" "## Training step" "## Profiles" \
               "## The GPU as a cluster" "## validate on four workers" "## Commands"; do
  grep -q "^$section" "$report" || fail "no '$section' in the report"
done
echo "gpu_check_smoke: every section reported"
