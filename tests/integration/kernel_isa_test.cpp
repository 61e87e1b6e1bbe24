// One binary on every x86-64: k25-run on CPUs this machine does not have, emulated by
// qemu-x86_64 (Debian's qemu-user), picks the set that CPU runs and gives the same tokens as
// that set forced here with K25_ISA; asking for a set the CPU lacks is one clear error. Any
// instruction of a higher set reached outside its kernel set would be SIGILL under qemu.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "command_output.h"
#include "server_process.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kRun = std::string(K25_BIN_DIR) + "/k25-run";
const std::string kModel = std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";

using Output = k25::testing::CommandOutput;

// Runs `prefix k25-run args`.
Output run(const std::string& prefix, const std::string& args) {
  return k25::testing::run_capturing(prefix + " " + kRun + " " + args);
}

const std::string kGenerate =
    "generate -m " + kModel + " -p 'Once upon a time' -n 24 --temp 0 -t 2 --json";

// qemu prints warnings about CPU features TCG lacks; only k25-run's lines matter.
std::string without_qemu_warnings(const std::string& err) {
  std::istringstream in(err);
  std::string line, out;
  while (std::getline(in, line)) {
    if (line.rfind("qemu-x86_64: warning:", 0) != 0) out += line + "\n";
  }
  return out;
}

class KernelIsa : public ::testing::Test {
 protected:
  void SetUp() override {
    // Missing qemu fails the test: scripts/setup.sh installs qemu-user.
    ASSERT_EQ(std::system("qemu-x86_64 -version >/dev/null 2>&1"), 0)
        << "qemu-x86_64 not found: install qemu-user (scripts/setup.sh does)";
    ASSERT_TRUE(fs::exists(kModel)) << kModel;
  }
};

// (emulated CPU, the set k25 must pick on it)
struct EmulatedCpu {
  const char* qemu_cpu;
  const char* isa;
};

TEST_F(KernelIsa, EmulatedCpusPickTheirSetAndGiveTheTokensOfThatSetForcedHere) {
  for (const EmulatedCpu cpu : {EmulatedCpu{"Haswell", "avx2"}, EmulatedCpu{"Nehalem", "scalar"}}) {
    const Output native = run("K25_ISA=" + std::string(cpu.isa), kGenerate);
    ASSERT_EQ(native.status, 0) << native.err;
    const Output emulated = run(std::string("qemu-x86_64 -cpu ") + cpu.qemu_cpu, kGenerate);
    ASSERT_EQ(emulated.status, 0) << cpu.qemu_cpu << ": " << emulated.err;
    const json n = json::parse(native.out), e = json::parse(emulated.out);
    EXPECT_EQ(n["isa"], cpu.isa);
    EXPECT_EQ(e["isa"], cpu.isa) << cpu.qemu_cpu;
    EXPECT_EQ(e["tokens"], n["tokens"]) << cpu.qemu_cpu;
    EXPECT_EQ(e["tokens"].size(), 24u);
  }
}

TEST_F(KernelIsa, ASetTheCpuLacksIsOneErrorLineNamingTheFeature) {
  const Output o = run("K25_ISA=avx512 qemu-x86_64 -cpu Haswell", kGenerate);
  EXPECT_NE(o.status, 0);
  EXPECT_EQ(without_qemu_warnings(o.err),
            "error: K25_ISA=avx512 needs the CPU feature avx512f/bw/dq/vl, which this CPU lacks\n");
  const Output unknown = run("K25_ISA=sse9", kGenerate);
  EXPECT_NE(unknown.status, 0);
  EXPECT_EQ(unknown.err,
            "error: K25_ISA=sse9 is not a kernel set (scalar, avx2, avxvnni or avx512)\n");
}

// The server names the set it runs in its start log, /metrics and /v1/models.
TEST_F(KernelIsa, TheServerReportsTheSetInUse) {
  k25::testing::ServerProcess server({"--model", kModel}, true, {"/usr/bin/env", "K25_ISA=avx2"});
  EXPECT_NE(server.log().find("\"isa\":\"avx2\""), std::string::npos) << server.log();
  const std::string metrics = k25::testing::http_call(server.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("\nk25_kernel_isa_info{isa=\"avx2\"} 1\n"), std::string::npos) << metrics;
  const json models = json::parse(k25::testing::http_call(server.port(), "GET", "/v1/models").body);
  EXPECT_EQ(models["data"][0]["meta"]["isa"], "avx2");
}

}  // namespace
