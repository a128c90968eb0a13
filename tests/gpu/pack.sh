#!/bin/sh
# `make gpu-pack`: what `make gpu-check` runs, packed for a GPU machine that
# has the NVIDIA driver and CUDA's libraries but not the build's tools: the
# five binaries gpu_check.py calls (stripped), the shared libraries they
# take from Debian's packages (not the C and C++ runtimes, not CUDA's) for
# a machine that lacks one (run_packed.sh points the loader at those it
# lacks), the commit they were built from and Fashion-MNIST, in
# .gpu/gpu-check.tar.xz (about 50 MB, under a 64 MiB limit on what such a
# machine is sent).
# There, from the source tree: sh tests/gpu/run_packed.sh [gpu_check.py's options].
set -eu
build=${1:-build}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/build/tools" "$stage/build/tests/bench" "$stage/data" "$stage/lib"
binaries="tools/trainsim tests/gpu_tests tests/exec_tests tests/tools_tests tests/bench/cuda_step_bench"
for f in $binaries; do
  [ -x "$build/$f" ] || { echo "gpu-pack: $build/$f is missing: build with CUDA first (make build)" >&2; exit 1; }
  strip -o "$stage/build/$f" "$build/$f"
done
for f in $binaries; do ldd "$build/$f"; done | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
  case "$lib" in
    /usr/local/cuda*|*/libcud*|*/libcublas*|*/libnccl*|*/libnv*) ;;  # CUDA's: the GPU machine's own
    */libc.so.*|*/libm.so.*|*/libdl.so.*|*/libpthread.so.*|*/librt.so.*|*/libgcc_s.so.*|*/libstdc++.so.*|*/ld-linux*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
data=/usr/share/datasets/fashion-mnist
[ -d "$data" ] || { echo "gpu-pack: no Fashion-MNIST at $data (the Debian package dataset-fashion-mnist)" >&2; exit 1; }
cp "$data"/*.gz "$stage/data/"
git describe --always --dirty 2>/dev/null > "$stage/commit" || echo unknown > "$stage/commit"
mkdir -p .gpu
tar -C "$stage" -cJf .gpu/gpu-check.tar.xz build data lib commit
echo "gpu-pack: .gpu/gpu-check.tar.xz, $(du -h .gpu/gpu-check.tar.xz | cut -f1) ($(cat "$stage/commit"))"
