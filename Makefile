# Front for the CMake build. `make run` and `make test` install their own dependencies.
JOBS ?= $(shell nproc)
BUILD ?= build
MODEL ?= ../shared/models/stories260K.gguf
CONFIG ?= k25_config.yaml

.PHONY: all setup build run test unit-test asan-test tsan-test fuzz-test aarch64-test bench format clean

all: build

setup:
	bash scripts/setup.sh

build:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
	cmake --build $(BUILD) -j $(JOBS)

run: setup build
	$(BUILD)/bin/k25-server --config $(CONFIG) --model $(MODEL)

# All tests: release unit + integration tests, the unit and integration tests again under
# ASan+UBSan (the servers and tools the integration tests start are built the same way), the
# engine, scheduler and server tests under TSan, a bounded libFuzzer run of each parser, and the
# aarch64 build's kernel tests under qemu.
test: setup build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 600
	$(MAKE) asan-test tsan-test fuzz-test aarch64-test

# Left out under the sanitizers, as measurements they distort (the release run has them): the
# emulated-CPU runs (ASan's shadow memory under qemu-user exhausts the machine's memory), the
# 1000-client memory bound (ASan's own overhead is above it) and the descriptor-limit test (at
# EMFILE, UBSan's vptr check cannot open the pipe it probes memory with and reports a false
# invalid vptr), and the installed-library test (it builds a plain C program against libk25.so,
# which cannot load an instrumented library: the ASan runtime must come first).
ASAN_LEFT_OUT := KernelIsa\.|InstalledLibrary\.|ServerLimits\.AThousandClientsThatDoNotReadKeepMemoryBounded|ServerLimits\.AtTheFileLimit
asan-test:
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DK25_SANITIZE=ON -DK25_BUILD_BENCH=OFF > /dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -L "unit|integration" -E '$(ASAN_LEFT_OUT)' --timeout 900

# The tests whose code runs on more than one thread: the engine and its scheduler, the server
# (in process), the KV tiers' I/O threads and the primitives they share.
TSAN_TESTS := Engine* */Engine* ElasticScheduler* Server* ToolCallsServer* FlashApi* OpenAiFields* \
  EventChannel* ThreadPoolTest* ChunkRunsTest* PromptWorkersTest* FirstTokenWatch* CircuitBreaker* L3* \
  DiskStoreTest* RedisStore* PagePool* StagingBuffer*
# Token equality over every reference model: nine minutes under TSan, and the engine threads it
# runs are the ones the stories260K speculation tests above already exercise.
TSAN_SKIP := *EveryOtherReferenceModelGivesTheTokensItGivesWithout*
empty :=
space := $(empty) $(empty)
tsan-test:
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DK25_TSAN=ON -DK25_BUILD_BENCH=OFF > /dev/null
	cmake --build build-tsan -j $(JOBS) --target k25_unit_tests
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  bin/k25_unit_tests --gtest_filter='$(subst $(space),:,$(strip $(TSAN_TESTS)))-$(TSAN_SKIP)'

fuzz-test:
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DK25_FUZZ=ON -DK25_BUILD_BENCH=OFF > /dev/null
	cmake --build build-fuzz -j $(JOBS) --target fuzz_targets
	bash scripts/run-fuzzers.sh build-fuzz/bin

# 64-bit ARM: the whole build cross-compiled with -Werror (no x86 intrinsic outside the x86
# kernel sets), then under qemu-aarch64 the kernel and llama.cpp reference tests of its scalar
# set and the tokeniser, template, parser and scheduler tests (CMakeLists.txt, label emulated).
aarch64-test:
	cmake -S . -B build-aarch64 -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DK25_BUILD_BENCH=OFF > /dev/null
	cmake --build build-aarch64 -j $(JOBS)
	cd build-aarch64 && ctest --output-on-failure -j $(JOBS) -L emulated --timeout 900

# PEER: a llama.cpp build/bin folder to compare against (skipped when absent).
PEER ?= ../peer/llama.cpp/build/bin
bench: build
	bash bench/run.sh --bin $(BUILD)/bin --peer $(PEER)

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf build build-asan build-tsan build-fuzz build-aarch64
