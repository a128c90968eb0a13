# trainsim: `make run` and `make test` work as root on a fresh Debian 12
# machine: they install what is missing, build, and run.
BUILD ?= build
JOBS ?= $(shell nproc)
TRAINSIM = $(BUILD)/tools/trainsim

# Debian packages the build, the tests, the data, the plots, the notebooks
# and the report's browser test need.
PACKAGES = build-essential cmake ninja-build pkg-config \
  libeigen3-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev libcli11-dev \
  zlib1g-dev libopenmpi-dev openmpi-bin dataset-fashion-mnist python3-matplotlib python3-numpy \
  jupyter-nbconvert python3-ipykernel chromium

# The CUDA backend is built wherever nvcc is (CUDA 13 at /usr/local/cuda).
CUDA_FLAG = $(if $(wildcard /usr/local/cuda/bin/nvcc),ON,OFF)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DTRAINSIM_WITH_CUDA=$(CUDA_FLAG) -DTRAINSIM_WARNINGS_AS_ERRORS=ON

.PHONY: all deps configure build run test bench clean

all: build

deps:
	@missing=$$(for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
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

clean:
	rm -rf $(BUILD)
