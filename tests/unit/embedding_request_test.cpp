// /v1/embeddings bodies: every input shape OpenAI accepts, the 400s, base64 and the response.
#include "server/embedding_request.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "server/api_error.h"

namespace k25 {
namespace {

using nlohmann::json;

ApiError error_of(const std::string& body) {
  try {
    parse_embedding_body(body);
  } catch (const ApiException& e) {
    return e.error();
  }
  ADD_FAILURE() << "no error for " << body;
  return {};
}

TEST(EmbeddingRequest, InputShapes) {
  EmbeddingRequestBody one = parse_embedding_body(R"({"input":"hello","model":"m"})");
  ASSERT_EQ(one.inputs.size(), 1u);
  EXPECT_EQ(*one.inputs[0].text, "hello");
  EXPECT_EQ(one.model, "m");
  EXPECT_FALSE(one.base64);
  EXPECT_FALSE(one.dimensions);

  EmbeddingRequestBody strings = parse_embedding_body(R"({"input":["a","b","c"]})");
  ASSERT_EQ(strings.inputs.size(), 3u);
  EXPECT_EQ(*strings.inputs[2].text, "c");

  EmbeddingRequestBody ids = parse_embedding_body(R"({"input":[1,2,3]})");
  ASSERT_EQ(ids.inputs.size(), 1u);  // one input given as token ids
  EXPECT_FALSE(ids.inputs[0].text);
  EXPECT_EQ(ids.inputs[0].ids, (std::vector<int64_t>{1, 2, 3}));

  EmbeddingRequestBody nested = parse_embedding_body(R"({"input":[[1,2],[3]]})");
  ASSERT_EQ(nested.inputs.size(), 2u);
  EXPECT_EQ(nested.inputs[1].ids, (std::vector<int64_t>{3}));

  EmbeddingRequestBody b64 =
      parse_embedding_body(R"({"input":"x","encoding_format":"base64","dimensions":64})");
  EXPECT_TRUE(b64.base64);
  EXPECT_EQ(b64.dimensions, 64);
}

TEST(EmbeddingRequest, BadInputsAre400NamingTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model":"m"})", "'input' is required"},
      {R"({"input":""})", "empty string"},
      {R"({"input":[]})", "empty array"},
      {R"({"input":["a",""]})", "input[1] is an empty string"},
      {R"({"input":[[1],[]]})", "input[1] is an empty array"},
      {R"({"input":["a",[1]]})", "input[1] must be a string"},
      {R"({"input":[[1],"a"]})", "input[1] must be a string or an array of token ids"},
      {R"({"input":[1,"a"]})", "token ids"},
      {R"({"input":[1.5]})", "token ids"},
      {R"({"input":7})", "'input' must be"},
      {R"({"input":{"a":1}})", "'input' must be"},
  };
  for (const auto& [body, message] : cases) {
    ApiError e = error_of(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, "input") << body;
    EXPECT_NE(e.message.find(message), std::string::npos) << body << ": " << e.message;
  }
  ApiError format = error_of(R"({"input":"a","encoding_format":"int8"})");
  EXPECT_EQ(format.param, "encoding_format");
  EXPECT_NE(format.message.find("int8"), std::string::npos);
  EXPECT_EQ(error_of(R"({"input":"a","dimensions":"64"})").param, "dimensions");
  EXPECT_EQ(error_of(R"({"input":"a","model":3})").param, "model");
  EXPECT_EQ(error_of("[1]").status, 400);
  EXPECT_EQ(error_of("{").status, 400);
}

TEST(EmbeddingRequest, TooManyInputs) {
  json many = {{"input", json::array()}};
  for (size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many["input"].push_back("a");
  EXPECT_NE(error_of(many.dump()).message.find("at most 2048"), std::string::npos);
}

// Standard base64 decoding, written independently of the encoder.
std::vector<uint8_t> decode_base64(const std::string& text) {
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char* at = std::strchr(alphabet, c);
    EXPECT_NE(at, nullptr) << c;
    acc = (acc << 6) | static_cast<uint32_t>(at - alphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> bits));
    }
  }
  return out;
}

TEST(EmbeddingRequest, Base64IsLittleEndianFloat32) {
  // 1.0f = 00 00 80 3F little-endian: "AACAPw==".
  EXPECT_EQ(base64_float32({1.0f}), "AACAPw==");
  const std::vector<float> values = {0.25f, -1.5f, 3.1415927f, -0.0f, 1e-30f};
  const std::vector<uint8_t> bytes = decode_base64(base64_float32(values));
  ASSERT_EQ(bytes.size(), values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits = 0;
    for (int b = 0; b < 4; ++b) bits |= static_cast<uint32_t>(bytes[i * 4 + b]) << (8 * b);
    EXPECT_EQ(std::bit_cast<uint32_t>(values[i]), bits) << i;
  }
}

TEST(EmbeddingRequest, ResponseShape) {
  json r = embedding_response({{1, 0}, {0, 1}}, false, "k25-model", 7);
  EXPECT_EQ(r["object"], "list");
  EXPECT_EQ(r["model"], "k25-model");
  ASSERT_EQ(r["data"].size(), 2u);
  EXPECT_EQ(r["data"][1]["object"], "embedding");
  EXPECT_EQ(r["data"][1]["index"], 1);
  EXPECT_EQ(r["data"][1]["embedding"], json::parse("[0.0,1.0]"));
  EXPECT_EQ(r["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(r["usage"]["total_tokens"], 7);
  json b = embedding_response({{1}}, true, "m", 1);
  EXPECT_EQ(b["data"][0]["embedding"], "AACAPw==");
}

}  // namespace
}  // namespace k25
