#!/bin/sh
# `make gpu-check`'s script on a machine without a GPU, nvidia-smi stood in
# for. First as it is: every section runs, each command failing without a
# GPU is reported as a line of the report, and the script neither stops on
# a Python error nor claims success (exit 1). Then with trainsim stood in
# for by tests/gpu/cpu_stand_in.py (each command on CPU workers, smaller):
# the sections whose commands then succeed render their reports from real
# outputs (every strategy's row, the traces, the profiles, the cluster, the
# predictions beside the runs, validate's tables), exit 0. Last, make
# gpu-pack's archive unpacked and run by run_packed.sh, as on a GPU machine.
# Usage: gpu_check_smoke.sh SOURCE_DIR BUILD_DIR
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
for section in "## Tests" "## Memcheck" "## Every strategy on four workers" "## Training step" "## Profiles" \
               "## The GPU as a cluster" "## validate on four workers" "## Several GPUs" "## Commands"; do
  grep -q "^$section" "$report" || fail "no '$section' in the report"
done
grep -q "^- not run: 1 GPU here" "$report" || fail "the section for several GPUs ran on one"
if [ -x "$build_dir/tests/gpu_tests" ]; then  # each repeat's totals once, each skipped test named once
  grep -Eq "^- .gpu_tests --gtest_repeat=3.: exit 0: passed [0-9]+ tests?\. \(×3\); skipped [0-9]+: [A-Z][A-Za-z]+\.[A-Za-z]+, " \
    "$report" || fail "no summary of gpu_tests' three runs"
  named=$(grep -E "^- .gpu_tests" "$report" | grep -o "CudaNetwork.EveryLayerConformsToItsCpuKernel" | wc -l)
  [ "$named" -eq 1 ] || fail "a test skipped in each of three runs named $named times, not once"
fi
echo "gpu_check_smoke: every section reported"
PATH="$work/bin:$PATH" python3 "$source_dir/tests/gpu/gpu_check.py" --build "$build_dir" --out "$work/refused" \
  --validate-models fmnist-cnn,fmnist-nope > "$work/log" 2>&1
status=$?
[ "$status" -eq 2 ] || fail "exit $status for a model validate does not take, not 2"
grep -q "^gpu-check: --validate-models takes fmnist-cnn, fmnist-resnet20" "$work/log" || fail "no line refusing the model"
PATH="$work/bin:$PATH" python3 "$source_dir/tests/gpu/gpu_check.py" --build "$build_dir" --out "$work/refused" \
  --validate-batches 64,0 > "$work/log" 2>&1
status=$?
[ "$status" -eq 2 ] || fail "exit $status for a batch of 0, not 2"
grep -q -- "--validate-batches positive integers" "$work/log" || fail "no line refusing the batch"
PATH="$work/bin:$PATH" python3 "$source_dir/tests/gpu/gpu_check.py" --build "$build_dir" --out "$work/refused" \
  --validate-iterations 5 > "$work/log" 2>&1
status=$?
[ "$status" -eq 2 ] || fail "exit $status for 5 iterations a validate, not 2"
grep -q -- "--validate-iterations at least 10" "$work/log" || fail "no line refusing the iterations"

# The sections trainsim alone runs (the tests need a GPU), and the step
# benchmark's table from its own names with stand-in times.
mkdir -p "$work/stand-in/tools" "$work/stand-in/tests/bench"
ln -s "$source_dir/tests/gpu/cpu_stand_in.py" "$work/stand-in/tools/trainsim"
ln -s "$source_dir/tests/gpu/cpu_stand_in.py" "$work/stand-in/tests/bench/cuda_step_bench"
TRAINSIM_REAL="$build_dir/tools/trainsim" TRAINSIM_REAL_BENCH="$build_dir/tests/bench/cuda_step_bench" \
  PATH="$work/bin:$PATH" python3 "$source_dir/tests/gpu/gpu_check.py" \
  --build "$work/stand-in" --out "$work/cpu" --sections strategies,steps,profiles,cluster,validate > "$work/log" 2>&1
status=$?
report="$work/cpu/gpu-check.md"
[ "$status" -eq 0 ] || fail "exit $status with trainsim on CPU workers, not 0"
! grep -q Traceback "$work/log" || fail "a Python error with trainsim on CPU workers"
for strategy in single dp-ps dp-ring dp-overlap pipesgd cgdp pipedream pipedream-sync dualpipe gpipe dsp parallax; do
  grep -Eq "^\| $strategy \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ ms \|[0-9., ?]*\|$" "$report" || fail "no run of $strategy in the report"
  grep -Eq "^\| $strategy \| [0-9.]+ ms \| [0-9.]+ ms \| [-+][0-9.]+% \| [0-9.]+ ms \| [-+][0-9.]+% \|$" "$report" ||
    fail "no simulation of $strategy beside its run"
  grep -Eq "^\| $strategy \| [0-9.]+ ms \| [0-9.]+ ms \| [-+][0-9.]+% \| [0-9.]+ ms \| [-+][0-9.]+% \| [a-z][a-z ]+ \| not timed \| [0-9.]+, \? \|$" "$report" ||
    fail "no validation of $strategy"
done
for mode in hybrid ps ar; do  # text-bag under Parallax's modes
  grep -Eq "^\| $mode \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ ms \|[0-9., ?]*\|$" "$report" || fail "no run of text-bag's parallax $mode"
done
for line in "^- dp-ring: iteration [0-9.]+ ms, worker 0 in its compute ops [0-9.]+ ms of it on the host, their kernels not timed \\(no GPU in the trace\\); .*forward" \
            "^- fortunes-lstm, batch 1024: [0-9.]+ ms \(runs " "^\| fc1 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \|$" \
            "^- 4 worker\(s\): .*ring hop on the host [0-9.]+ GB/s after [0-9.]+ µs" \
            "^fmnist-resnet20, batch 16 per worker, 1 rounds" \
            "^\| fortunes-lstm \| 1024 \| 2\.000 ms \(runs 1\.000, 2\.000, 3\.000\) \| no PyTorch \| n/a \|$" \
            "^\| fmnist-cnn \| 64 \| 2\.000 ms .* \| 2\.000 ms .* \| 2\.000 ms .* \| 1\.00 \|$"; do
  grep -Eq "$line" "$report" || fail "no line like '$line' in the report with trainsim on CPU workers"
done
for batch in 64 256; do  # each batch validated (the stand-in runs each at 16)
  [ -f "$work/cpu/validate-fmnist-cnn-b$batch.json" ] || fail "no validate of fmnist-cnn at batch $batch"
  for what in profile cluster; do  # what its predictions read, for simulate to replay
    grep -q '"format": "trainsim\.'"$what"'/1"' "$work/cpu/validate-fmnist-cnn-b$batch-$what.json" ||
      fail "no $what validate measured of fmnist-cnn at batch $batch"
  done
  [ -s "$work/cpu/validate-fmnist-cnn-b$batch-traces/single-measured.json" ] ||
    fail "no measured trace of single in validate's at batch $batch"
done
[ "$(grep -c '^fmnist-cnn, batch 16 per worker, 1 rounds' "$report")" -eq 2 ] || fail "not two validate tables of fmnist-cnn"
if command -v mpirun > /dev/null; then  # dp-ring's workers as processes beside threads
  grep -Eq "^dp-ring on .cuda:0x2., its two workers as processes .* largest relative gap of a loss [0-9.e+-]+; " \
    "$report" || fail "no run of dp-ring's workers as processes in the report"
fi
echo "gpu_check_smoke: the sections trainsim runs reported from trainsim's outputs"

# Two GPUs stood in for: the section for several GPUs renders its table
# from the stand-in's runs (a GPU each as CPU workers).
printf '#!/bin/sh\necho "Stand-in GPU, 0.0, 1 MiB"\necho "Stand-in GPU, 0.0, 1 MiB"\n' > "$work/bin/nvidia-smi"
TRAINSIM_REAL="$build_dir/tools/trainsim" PATH="$work/bin:$PATH" python3 "$source_dir/tests/gpu/gpu_check.py" \
  --build "$work/stand-in" --out "$work/two" --sections gpus > "$work/log" 2>&1
status=$?
report="$work/two/gpu-check.md"
[ "$status" -eq 0 ] || fail "exit $status with two stand-in GPUs, not 0"
row='[0-9.]+ \| [0-9.]+ ms \| [0-9.]+ \| [0-9.]+ ms \| [0-9.]+e[-+][0-9]+ \|$'
for run in "dp-ring, NCCL between the GPUs \(threads\)" "1f1b, a stage per GPU"; do
  grep -Eq "^\| $run \| $row" "$report" || fail "no row of '$run' with two stand-in GPUs"
done
if command -v mpirun > /dev/null; then
  grep -Eq "^\| dp-ring, a rank per GPU, NCCL between the ranks \| $row" "$report" ||
    fail "no row of dp-ring's ranks with two stand-in GPUs"
  grep -Eq "^\| 1f1b, a rank per GPU, NCCL's send and receive between the ranks \| $row" "$report" ||
    fail "no row of 1f1b's ranks with two stand-in GPUs"
fi
grep -Eq "^.trainsim profile --model fmnist-cnn --device cuda:0,1 --cluster-out. .*a boundary between them [0-9.]+ µs" \
  "$report" || fail "no probe of two stand-in GPUs"
grep -Eq "^\| gpipe \| [0-9.]+ ms \| [0-9.]+ ms \| [-+][0-9.]+% \| [0-9.]+ ms \| [-+][0-9.]+% \| [a-z]" "$report" ||
  fail "no validation of gpipe with two stand-in GPUs"
# NCCL's AllReduce validated as its own entry (the project's ring in its place here)
grep -Eq "^\| dp-ring:algorithm=ring \| [0-9.]+ ms \| [0-9.]+ ms \| [-+][0-9.]+% " "$report" ||
  fail "no validation of dp-ring's library AllReduce with two stand-in GPUs"
echo "gpu_check_smoke: the section for several GPUs reported from trainsim's outputs"

# make gpu-pack's archive unpacked and run as on a GPU machine
# (tests/gpu/run_packed.sh, from a tree of its own so the source tree's
# .gpu/ stays as it is; xz at its fastest here): the packed binaries run
# from where it unpacked them and the report comes out.
if [ -x "$build_dir/tests/gpu_tests" ] && [ -x "$build_dir/tests/bench/cuda_step_bench" ] &&
   [ -d /usr/share/datasets/fashion-mnist ]; then
  mkdir -p "$work/tree"
  ln -s "$source_dir/tests" "$work/tree/tests"
  (cd "$work/tree" && XZ_OPT=-0 sh "$source_dir/tests/gpu/pack.sh" "$build_dir") > "$work/log" 2>&1 ||
    fail "gpu-pack failed"
  (cd "$work/tree" && PATH="$work/bin:$PATH" GPU_PACK_DIR="$work/unpacked" sh tests/gpu/run_packed.sh \
    --out "$work/packed" --sections tests --test-repeat 1) > "$work/log" 2>&1
  status=$?
  # trainsim's CUDA finds no GPU it can use here: the check says so and fails
  [ "$status" -eq 1 ] || fail "exit $status from the unpacked gpu-check without a usable GPU, not 1"
  grep -q "^- trainsim sees no GPU it can use: no GPU: " "$work/packed/gpu-check.md" ||
    fail "the unpacked check did not say trainsim sees no GPU"
  grep -q "^\$ $work/unpacked/build/tests/gpu_tests --gtest_repeat=1" "$work/packed/gpu-check.md" ||
    fail "the unpacked check did not run the packed gpu_tests"
  grep -Eq "^- .gpu_tests --gtest_repeat=1.: exit 0: passed " "$work/packed/gpu-check.md" ||
    fail "no summary of the packed gpu_tests"
  packed=$(tar -tJf "$work/tree/.gpu/gpu-check.tar.xz")
  for lib in $(ldd "$build_dir/tools/trainsim" | awk '$3 ~ /^\/(usr\/)?lib/ {print $1}' |
               grep -Ev '^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+)\.so'); do
    echo "$packed" | grep -qx "lib/$lib" || fail "the pack holds no $lib for a machine without it"
  done
  echo "gpu_check_smoke: make gpu-pack's archive ran where it was unpacked"
fi
