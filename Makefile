# Front for the CMake build. `make run` and `make test` install their own dependencies.
JOBS ?= $(shell nproc)
BUILD ?= build
MODEL ?= ../shared/models/stories260K.gguf
CONFIG ?= k25_config.yaml

.PHONY: all setup build run test unit-test asan-test fuzz-test bench format clean

all: build

setup:
	bash scripts/setup.sh

build:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: setup build
	$(BUILD)/bin/k25-server --config $(CONFIG) --model $(MODEL)

# All tests: release unit + integration tests, the unit tests again under ASan+UBSan,
# and a bounded libFuzzer run of each parser target.
test: setup build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600
	$(MAKE) asan-test fuzz-test

asan-test:
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DK25_SANITIZE=ON -DK25_BUILD_BENCH=OFF > /dev/null
	cmake --build build-asan -j $(JOBS) --target k25_unit_tests
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -L unit --timeout 900

fuzz-test:
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DK25_FUZZ=ON -DK25_BUILD_BENCH=OFF > /dev/null
	cmake --build build-fuzz -j $(JOBS) --target fuzz_targets
	bash scripts/run-fuzzers.sh build-fuzz/bin

# PEER: a llama.cpp build/bin folder to compare against (skipped when absent).
PEER ?= ../peer/llama.cpp/build/bin
bench: build
	bash bench/run.sh --bin $(BUILD)/bin --peer $(PEER)

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf build build-asan build-fuzz
