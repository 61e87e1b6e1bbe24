#include "server/embedding_request.h"

#include <bit>
#include <cstring>

#include "core/error.h"
#include "server/api_error.h"
#include "server/request_parsing.h"

namespace k25 {

using nlohmann::json;

namespace {

[[noreturn]] void bad_input(std::string message) {
  throw_bad_request(std::move(message), "input", "invalid_value");
}

std::vector<int64_t> token_ids(const json& array, const std::string& where) {
  std::vector<int64_t> ids;
  for (const json& id : array) {
    if (!id.is_number_integer()) bad_input(where + " must hold token ids (integers)");
    if (id.is_number_unsigned() && id.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      bad_input(concat(where, ": ", id.dump(), " is not a token id"));
    }
    ids.push_back(id.get<int64_t>());
  }
  if (ids.empty()) bad_input(where + " is an empty array of token ids");
  return ids;
}

std::vector<EmbeddingInput> get_inputs(const json& body) {
  auto it = body.find("input");
  if (it == body.end() || it->is_null()) bad_input("'input' is required");
  const json& input = *it;
  std::vector<EmbeddingInput> inputs;
  if (input.is_string()) {
    if (input.get_ref<const std::string&>().empty()) bad_input("'input' is an empty string");
    inputs.push_back({input.get<std::string>(), {}});
    return inputs;
  }
  if (!input.is_array()) {
    bad_input(
        "'input' must be a string, an array of strings, or an array of token ids or of "
        "arrays of token ids");
  }
  if (input.empty()) bad_input("'input' is an empty array");
  if (input.size() > kMaxEmbeddingInputs) {
    bad_input(concat("'input' has ", input.size(), " entries; at most ", kMaxEmbeddingInputs));
  }
  if (input.front().is_number()) {
    inputs.push_back({std::nullopt, token_ids(input, "'input'")});
    return inputs;
  }
  const bool strings = input.front().is_string();
  for (size_t i = 0; i < input.size(); ++i) {
    const json& entry = input[i];
    const std::string where = concat("input[", i, "]");
    if (strings) {
      if (!entry.is_string()) bad_input(where + " must be a string like input[0]");
      if (entry.get_ref<const std::string&>().empty()) bad_input(where + " is an empty string");
      inputs.push_back({entry.get<std::string>(), {}});
    } else {
      if (!entry.is_array()) {
        bad_input(where + " must be a string or an array of token ids (all entries alike)");
      }
      inputs.push_back({std::nullopt, token_ids(entry, where)});
    }
  }
  return inputs;
}

}  // namespace

EmbeddingRequestBody parse_embedding_body(std::string_view text) {
  const json body = parse_json_body(text);
  if (!body.is_object()) throw_bad_request("the request body must be a JSON object");
  EmbeddingRequestBody out;
  out.inputs = get_inputs(body);
  if (auto it = body.find("model"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) throw_bad_request("'model' must be a string", "model", "invalid_type");
    out.model = it->get<std::string>();
  }
  if (auto it = body.find("encoding_format"); it != body.end() && !it->is_null()) {
    const std::string format = it->is_string() ? it->get<std::string>() : it->dump();
    if (format != "float" && format != "base64") {
      throw_bad_request(concat("'encoding_format' must be \"float\" or \"base64\", got ", format),
                        "encoding_format", "invalid_value");
    }
    out.base64 = format == "base64";
  }
  if (auto it = body.find("dimensions"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX)) {
      throw_bad_request("'dimensions' must be an integer", "dimensions", "invalid_type");
    }
    out.dimensions = it->get<int64_t>();
  }
  return out;
}

std::string base64_float32(const std::vector<float>& values) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes(values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits = std::bit_cast<uint32_t>(values[i]);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<uint8_t>(bits >> (8 * b));
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t group = static_cast<uint32_t>(bytes[i]) << 16;
    if (n > 1) group |= static_cast<uint32_t>(bytes[i + 1]) << 8;
    if (n > 2) group |= bytes[i + 2];
    out += kAlphabet[(group >> 18) & 63];
    out += kAlphabet[(group >> 12) & 63];
    out += n > 1 ? kAlphabet[(group >> 6) & 63] : '=';
    out += n > 2 ? kAlphabet[group & 63] : '=';
  }
  return out;
}

json embedding_response(const std::vector<std::vector<float>>& vectors, bool base64,
                        const std::string& model, int64_t prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json embedding = base64 ? json(base64_float32(vectors[i])) : json(vectors[i]);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(embedding)}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace k25
