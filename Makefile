# trainsim: `make run` and `make test` work as root on a fresh Debian 12
# machine: they install what is missing, build, and run.
BUILD ?= build
JOBS ?= $(shell nproc)
TRAINSIM = $(BUILD)/tools/trainsim

# Debian packages the build, the tests, the data, the plots, the notebooks
# and the report's browser test need.
PACKAGES = build-essential cmake ninja-build pkg-config \
  libeigen3-dev libopenblas-pthread-dev libdnnl-dev libxsmm-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev libcli11-dev \
  zlib1g-dev libprotobuf-dev protobuf-compiler libopenmpi-dev openmpi-bin iproute2 dataset-fashion-mnist fortunes fortunes-min python3-matplotlib python3-numpy \
  jupyter-nbconvert python3-ipykernel chromium

# The CUDA backend is built wherever nvcc is (CUDA 13 at /usr/local/cuda).
CUDA_FLAG = $(if $(wildcard /usr/local/cuda/bin/nvcc),ON,OFF)
# Unity builds: a fresh build, as CI's, in less than half the CPU time.
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DTRAINSIM_WITH_CUDA=$(CUDA_FLAG) -DTRAINSIM_WARNINGS_AS_ERRORS=ON \
  -DTRAINSIM_UNITY_BUILD=ON

# Sanitizer builds and fuzzing (make test-asan, test-tsan, fuzz): clang with
# its sanitizer and libFuzzer runtimes and llvm-symbolizer, each in its own
# build folder, without CUDA, MPI and oneDNN (its OpenMP runtime is not
# instrumented).
SANITIZE_PACKAGES = clang libclang-rt-dev llvm
SANITIZE_FLAGS = -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ -DTRAINSIM_WITH_CUDA=OFF -DTRAINSIM_WITH_MPI=OFF \
  -DTRAINSIM_WITH_ONEDNN=OFF -DTRAINSIM_UNITY_BUILD=ON
FUZZ_SECONDS ?= 20
# make test-tsan builds only exec_tests (the executor, its transport and
# interpreter, the data and kernels they run); TSAN_TESTS narrows it (ctest -R).
TSAN_TESTS ?= .

.PHONY: all deps configure build run test bench peer-bench ddp-compare fuzz test-asan test-tsan gpu-check gpu-pack clean

all: build

deps:
	@missing=$$(for p in $(PACKAGES) $(EXTRA_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q $$missing; \
	fi
	@[ "$(CUDA_FLAG)" = ON ] || echo "note: no nvcc at /usr/local/cuda/bin: building without the CUDA backend"

configure: deps
	@[ -f $(BUILD)/build.ninja ] || cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(TRAINSIM) predict --model vgg16 --cluster p40x4-pcie3

test: build
	ctest --test-dir $(BUILD) -LE gpu --output-on-failure -j $(JOBS)
	@grep -ho "GPU test skipped: .*" $(BUILD)/Testing/Temporary/LastTest.log | sort -u || true

bench: build
	$(BUILD)/tests/bench/predict_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
	$(BUILD)/tests/bench/des_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
	$(BUILD)/tests/bench/partition_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

# Every libFuzzer harness (tests/fuzz) for FUZZ_SECONDS each; fails on a finding.
fuzz:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(SANITIZE_PACKAGES)"
	@[ -f build-fuzz/build.ninja ] || cmake -S . -B build-fuzz -G Ninja $(SANITIZE_FLAGS) -DTRAINSIM_FUZZ=ON -DTRAINSIM_BUILD_TESTS=OFF
	cmake --build build-fuzz -j $(JOBS) --target fuzzers
	tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

# The whole CPU suite under AddressSanitizer and UndefinedBehaviorSanitizer.
test-asan:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(SANITIZE_PACKAGES)"
	@[ -f build-asan/build.ninja ] || cmake -S . -B build-asan -G Ninja $(SANITIZE_FLAGS) -DTRAINSIM_SANITIZE=address
	cmake --build build-asan -j $(JOBS)
	UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan -LE "gpu|notebook" --output-on-failure -j $(JOBS)

# The executor's threaded tests (exec_tests without the single-threaded layer
# and dataset tests) under ThreadSanitizer; the other suites are not built
# here, so their placeholders (*_NOT_BUILT) are left out.
test-tsan:
	@$(MAKE) --no-print-directory deps EXTRA_PACKAGES="$(SANITIZE_PACKAGES)"
	@[ -f build-tsan/build.ninja ] || cmake -S . -B build-tsan -G Ninja $(SANITIZE_FLAGS) -DTRAINSIM_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS) --target exec_tests
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --test-dir build-tsan -R "$(TSAN_TESTS)" -E _NOT_BUILT -LE gpu --output-on-failure -j $(JOBS)

# trainsim's training step on this CPU beside PyTorch's, model by model
# (tests/bench/peer_bench.py). PyTorch goes into a virtual environment of its
# own, $(BUILD)/peer-venv, the first time (pip: a few GB with its CUDA
# libraries); it is never a build or test dependency.
PEER_VENV = $(BUILD)/peer-venv
peer-bench: build
	@[ -x $(PEER_VENV)/bin/python ] || python3 -m venv $(PEER_VENV)
	@$(PEER_VENV)/bin/python -c 'import torch' 2>/dev/null || $(PEER_VENV)/bin/pip install --quiet torch numpy
	$(PEER_VENV)/bin/python tests/bench/peer_bench.py --build $(BUILD)

# PyTorch DDP (gloo) across emulated hosts (root) beside trainsim's
# prediction of its step and trainsim's own dp-overlap run
# (tests/bench/ddp_compare.py), with PyTorch from the same environment.
DDP_HOSTS ?= 4
DDP_LINK ?= 1gbit
ddp-compare: build
	@[ -x $(PEER_VENV)/bin/python ] || python3 -m venv $(PEER_VENV)
	@$(PEER_VENV)/bin/python -c 'import torch' 2>/dev/null || $(PEER_VENV)/bin/pip install --quiet torch numpy
	python3 tests/bench/ddp_compare.py $(BUILD)/tools/trainsim $(abspath $(PEER_VENV))/bin/python --hosts $(DDP_HOSTS) --link $(DDP_LINK)

# On a machine with a GPU: the GPU tests, every strategy on virtual GPU
# workers, PyTorch's step beside trainsim's, GPU profiles and cluster probe
# with the predictions from them, and validate, written to
# docs/gpu-check/gpu-check.md (tests/gpu/gpu_check.py). GPU_CHECK_SECTIONS
# runs a part of it (tests,strategies,steps,profiles,cluster,validate).
gpu-check: build
	python3 tests/gpu/gpu_check.py --build $(BUILD) --out docs/gpu-check --commit "$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" $(if $(GPU_CHECK_SECTIONS),--sections $(GPU_CHECK_SECTIONS))

# What gpu-check runs, packed for a GPU machine without the build's tools
# (.gpu/gpu-check.tar.xz; there, sh tests/gpu/run_packed.sh runs it).
gpu-pack: build
	sh tests/gpu/pack.sh $(BUILD)

clean:
	rm -rf $(BUILD)
