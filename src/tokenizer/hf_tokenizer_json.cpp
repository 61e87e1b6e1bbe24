#include "tokenizer/hf_tokenizer_json.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/tokenizer_pretokenizer.h"
#include "tokenizer/tokenizer_spm.h"
#include "tokenizer/tokenizer_token_index.h"
#include "tokenizer/unicode.h"

namespace k25 {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kMetaspace = "\xE2\x96\x81";  // "▁"
// Score of an SPM token that no merge produces: never preferred.
constexpr float kUnmergedScore = -1e30f;

json load_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
}

void save_json(const json& j, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, ": cannot create");
  out << j.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
  if (!out) fail(path, ": write failed");
}

// The components of a normalizer/pre_tokenizer/decoder, with Sequences flattened.
void flatten(const json& node, std::vector<const json*>& out) {
  if (!node.is_object()) return;
  const std::string type = node.value("type", "");
  if (type == "Sequence") {
    for (const char* key : {"normalizers", "pretokenizers", "decoders"}) {
      if (node.contains(key) && node[key].is_array()) {
        for (const json& child : node[key]) flatten(child, out);
      }
    }
    return;
  }
  out.push_back(&node);
}

std::vector<const json*> components(const json& root, const char* key) {
  std::vector<const json*> out;
  if (root.contains(key)) flatten(root[key], out);
  return out;
}

// A token name in tokenizer_config.json: a string or {"content": ...}.
std::string token_name(const json& config, const char* key) {
  if (!config.contains(key)) return "";
  const json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

std::pair<std::string, std::string> split_merge(const json& m, const std::string& path) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t sep = s.find(' ', 1);
    if (sep == std::string::npos) fail(path, ": merge '", s, "' has no space");
    return {s.substr(0, sep), s.substr(sep + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  }
  fail(path, ": a merge is neither \"a b\" nor [a, b]");
}

// The byte-level pre-tokenisers k25 knows, by the name it gives them.
constexpr std::pair<PreTokenizerKind, const char*> kByteLevelPreTokenizers[] = {
    {PreTokenizerKind::Gpt2, "gpt-2"},          {PreTokenizerKind::Llama3, "llama-bpe"},
    {PreTokenizerKind::Qwen2, "qwen2"},         {PreTokenizerKind::Qwen35, "qwen35"},
    {PreTokenizerKind::Tekken, "tekken"},       {PreTokenizerKind::DeepseekLlm, "deepseek-llm"},
    {PreTokenizerKind::Starcoder, "starcoder"}, {PreTokenizerKind::Falcon, "falcon"},
};

bool same_steps(PreTokenizerKind kind, const std::vector<HfPreTokenizerStep>& found) {
  using T = HfPreTokenizerStep::Type;
  const std::vector<HfPreTokenizerStep> expected = hf_pre_tokenizer_steps(kind);
  if (found.size() != expected.size()) return false;
  for (size_t i = 0; i < found.size(); ++i) {
    // DeepSeek LLM's digits: llama.cpp groups them (\p{N}+); its vocabulary has no token of two
    // or more digits, so grouped and individual digits give the same ids. Accept either.
    const bool either_digits = kind == PreTokenizerKind::DeepseekLlm &&
                               expected[i].type == T::Digits &&
                               found[i].type == T::IndividualDigits;
    if (!(found[i] == expected[i]) && !either_digits) return false;
  }
  return true;
}

// Which pre-tokeniser a byte-level tokenizer.json uses: its components, reduced to
// HfPreTokenizerSteps, must be one of the known Sequences.
std::string detect_pre(const std::vector<const json*>& pre, const std::string& path) {
  using T = HfPreTokenizerStep::Type;
  std::vector<HfPreTokenizerStep> steps;
  for (const json* c : pre) {
    const std::string type = c->value("type", "");
    if (type == "Split") {
      const json& pattern = c->value("pattern", json::object());
      if (!pattern.contains("Regex") || !pattern["Regex"].is_string()) {
        fail(path, ": Split pre-tokenizer without a regex pattern");
      }
      steps.push_back({T::Split, pattern["Regex"].get<std::string>()});
    } else if (type == "ByteLevel") {
      if (c->value("use_regex", true)) steps.push_back({T::Split, gpt2_pattern()});
    } else if (type == "Digits") {
      steps.push_back({c->value("individual_digits", false) ? T::IndividualDigits : T::Digits, ""});
    } else if (type == "Punctuation") {
      const std::string behavior = c->value("behavior", "");
      if (behavior != "Contiguous") {
        fail(path, ": unsupported Punctuation pre-tokenizer behavior '", behavior, "'");
      }
      steps.push_back({T::Punctuation, ""});
    } else {
      fail(path, ": unsupported pre-tokenizer '", type, "'");
    }
  }
  if (steps.empty()) fail(path, ": byte-level tokenizer without a pre-tokenizer regex");
  for (auto [kind, name] : kByteLevelPreTokenizers) {
    if (same_steps(kind, steps)) return name;
  }
  // Name the first regex k25 does not know, else the combination.
  for (const HfPreTokenizerStep& step : steps) {
    if (step.type != T::Split) continue;
    bool known = false;
    for (auto [kind, name] : kByteLevelPreTokenizers) {
      for (const HfPreTokenizerStep& k : hf_pre_tokenizer_steps(kind)) known = known || k == step;
    }
    if (!known) fail(path, ": unsupported pre-tokenizer regex '", step.regex, "'");
  }
  fail(path, ": unsupported sequence of ", steps.size(), " pre-tokenizer steps");
}

// The pre_tokenizer Sequence of a byte-level pre-tokeniser. The GPT-2 Split is written as
// ByteLevel(use_regex = true), as Hugging Face's own files do.
json pre_tokenizer_json(PreTokenizerKind kind) {
  using T = HfPreTokenizerStep::Type;
  auto byte_level = [](bool use_regex) {
    return json{{"type", "ByteLevel"},
                {"add_prefix_space", false},
                {"trim_offsets", false},
                {"use_regex", use_regex}};
  };
  json steps = json::array();
  bool regex_in_byte_level = false;
  for (const HfPreTokenizerStep& step : hf_pre_tokenizer_steps(kind)) {
    switch (step.type) {
      case T::Split:
        if (step.regex == gpt2_pattern() && !regex_in_byte_level) {
          steps.push_back(byte_level(true));
          regex_in_byte_level = true;
        } else {
          steps.push_back({{"type", "Split"},
                           {"pattern", {{"Regex", step.regex}}},
                           {"behavior", "Isolated"},
                           {"invert", false}});
        }
        break;
      case T::Digits:
      case T::IndividualDigits:
        steps.push_back({{"type", "Digits"}, {"individual_digits", step.type != T::Digits}});
        break;
      case T::Punctuation:
        steps.push_back({{"type", "Punctuation"}, {"behavior", "Contiguous"}});
        break;
    }
  }
  if (!regex_in_byte_level) steps.push_back(byte_level(false));
  return {{"type", "Sequence"}, {"pretokenizers", steps}};
}

// tokenizer_config.json's chat_template: one template, or a list of named ones
// ([{"name": "default", "template": ...}, {"name": "tool_use", ...}]): "default" (else the first)
// is the chat template, the others are kept by name.
void read_chat_templates(const std::string& config_path, const json& t, Vocab& v) {
  if (t.is_string()) {
    v.chat_template = t.get<std::string>();
    return;
  }
  if (t.is_null()) return;
  if (!t.is_array()) fail(config_path, ": chat_template is neither a string nor a list");
  for (size_t i = 0; i < t.size(); ++i) {
    const json& named = t[i];
    if (!named.is_object() || !named.contains("name") || !named["name"].is_string() ||
        !named.contains("template") || !named["template"].is_string()) {
      fail(config_path, ": chat_template[", i, "] is not {\"name\": string, \"template\": string}");
    }
    const std::string name = named["name"].get<std::string>();
    const std::string text = named["template"].get<std::string>();
    if (name == "default") {
      v.chat_template = text;
    } else {
      v.named_chat_templates[name] = text;
    }
  }
  if (v.chat_template.empty() && !t.empty()) v.chat_template = t[0]["template"].get<std::string>();
}

}  // namespace

Vocab read_hf_tokenizer_json(const std::string& path) {
  const json root = load_json(path);
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) {
    fail(path, ": no \"model\" object");
  }
  const json& model = root["model"];
  const std::string model_type = model.value("type", "BPE");
  if (model_type != "BPE") fail(path, ": unsupported model type '", model_type, "' (need BPE)");
  if (!model.contains("vocab") || !model["vocab"].is_object()) fail(path, ": model has no vocab");
  const auto normalizers = components(root, "normalizer");
  const auto pre = components(root, "pre_tokenizer");
  const auto decoders = components(root, "decoder");
  auto has_type = [](const std::vector<const json*>& list, const char* type) {
    return std::any_of(list.begin(), list.end(),
                       [&](const json* c) { return c->value("type", "") == type; });
  };

  Vocab v;
  const bool byte_level = has_type(pre, "ByteLevel") || has_type(decoders, "ByteLevel");
  v.kind = byte_level ? Vocab::Kind::Bpe : Vocab::Kind::Spm;
  if (byte_level) {
    for (const json* n : normalizers) {
      const std::string type = n->value("type", "");
      if (type != "NFC") fail(path, ": unsupported normalizer '", type, "' for byte-level BPE");
    }
    v.pre = detect_pre(pre, path);
  } else {
    if (!model.value("byte_fallback", false)) {
      fail(path, ": BPE without ByteLevel or byte_fallback is not supported");
    }
    for (const json* n : normalizers) {
      if (n->value("type", "") == "Prepend") v.add_space_prefix = true;
    }
    for (const json* p : pre) {
      if (p->value("type", "") != "Metaspace") {
        fail(path, ": unsupported pre-tokenizer '", p->value("type", ""),
             "' for SentencePiece BPE");
      }
      v.add_space_prefix = v.add_space_prefix || p->value("add_prefix_space", false) ||
                           p->value("prepend_scheme", "never") != "never";
    }
  }

  // Tokens: the model vocab plus added tokens; ids not mentioned become placeholders.
  std::vector<std::pair<std::string, int64_t>> entries;
  entries.reserve(model["vocab"].size());
  int64_t max_id = -1;
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (1 << 30)) {
      fail(path, ": vocab entry '", text, "' has no valid id");
    }
    entries.emplace_back(text, id.get<int64_t>());
    max_id = std::max(max_id, id.get<int64_t>());
  }
  struct Added {
    std::string text;
    int64_t id;
    bool special;
  };
  std::vector<Added> added;
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const json& a : root["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
          !a.contains("content") || !a["content"].is_string() || a["id"].get<int64_t>() < 0 ||
          a["id"].get<int64_t>() > (1 << 30)) {
        fail(path, ": malformed added_tokens entry");
      }
      added.push_back(
          {a["content"].get<std::string>(), a["id"].get<int64_t>(), a.value("special", false)});
      max_id = std::max(max_id, added.back().id);
    }
  }
  if (max_id < 0) fail(path, ": empty vocabulary");
  const size_t n = static_cast<size_t>(max_id) + 1;
  v.tokens.assign(n, "");
  v.types.assign(n, TokenType::Unused);
  std::vector<bool> filled(n, false);
  for (auto& [text, id] : entries) {
    v.tokens[id] = std::move(text);
    v.types[id] = TokenType::Normal;
    filled[id] = true;
  }
  for (Added& a : added) {
    v.tokens[a.id] = std::move(a.text);
    v.types[a.id] = a.special ? TokenType::Control : TokenType::UserDefined;
    filled[a.id] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (!filled[i]) v.tokens[i] = "[PAD" + std::to_string(i) + "]";
  }
  const TokenIndex index(v.tokens);
  auto id_of = [&](const std::string& name) -> TokenId {
    return name.empty() ? -1 : index.find(name);
  };
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    v.unk = id_of(model["unk_token"].get<std::string>());
    if (v.unk >= 0) v.types[v.unk] = TokenType::Unknown;
  }

  // Merges: kept as "a b" for byte-level BPE, turned into scores for SentencePiece.
  static const json kNoMerges = json::array();
  const json& merges = model.contains("merges") ? model["merges"] : kNoMerges;
  if (!merges.is_array()) fail(path, ": model.merges is not an array");
  if (byte_level) {
    v.merges.reserve(merges.size());
    for (const json& m : merges) {
      auto [a, b] = split_merge(m, path);
      v.merges.push_back(a + " " + b);
    }
  } else {
    v.scores.assign(n, kUnmergedScore);
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      auto [a, b] = split_merge(merges[rank], path);
      const TokenId id = index.find(a + b);
      if (id >= 0) v.scores[id] = std::max(v.scores[id], -static_cast<float>(rank));
    }
    for (size_t i = 0; i < n; ++i) {
      const std::string& t = v.tokens[i];
      const bool single_char = !t.empty() && unicode::decode_utf8(t, 0).length == t.size();
      if (v.types[i] == TokenType::Normal && parse_byte_token(t) >= 0) v.types[i] = TokenType::Byte;
      if (single_char || v.types[i] != TokenType::Normal) v.scores[i] = 0.0f;
    }
  }

  // tokenizer_config.json: BOS/EOS and whether to add them, the chat template.
  const fs::path config_path = fs::path(path).parent_path() / "tokenizer_config.json";
  json config = json::object();
  if (fs::exists(config_path)) {
    config = load_json(config_path.string());
    if (!config.is_object()) fail(config_path.string(), ": not a JSON object");
  }
  v.bos = id_of(token_name(config, "bos_token"));
  v.eos = id_of(token_name(config, "eos_token"));
  v.pad = id_of(token_name(config, "pad_token"));
  if (const TokenId unk = id_of(token_name(config, "unk_token")); unk >= 0) v.unk = unk;
  if (!config.contains("eos_token") && !config.contains("bos_token")) {
    // No config: the conventional names.
    const bool spm = v.kind == Vocab::Kind::Spm;
    v.bos = id_of(spm ? "<s>" : "<|endoftext|>");
    v.eos = id_of(spm ? "</s>" : "<|endoftext|>");
  }
  const bool default_bos =
      v.kind == Vocab::Kind::Spm || pre_tokenizer_adds_bos(pre_tokenizer_from_name(v.pre));
  auto flag = [&](const char* key, bool fallback) {
    return config.contains(key) && config[key].is_boolean() ? config[key].get<bool>() : fallback;
  };
  v.add_bos = flag("add_bos_token", default_bos);
  v.add_eos = flag("add_eos_token", false);
  if (config.contains("chat_template")) {
    read_chat_templates(config_path.string(), config["chat_template"], v);
  }
  return v;
}

std::unique_ptr<Tokenizer> Tokenizer::from_hf_json(const std::string& tokenizer_json_path) {
  Vocab v = read_hf_tokenizer_json(tokenizer_json_path);
  try {
    return std::make_unique<Tokenizer>(std::move(v));
  } catch (const Error& e) {
    fail(tokenizer_json_path, ": ", e.what());
  }
}

namespace {

// SentencePiece merges: every split of a token into two tokens, best-scoring token first.
json spm_merges(const Vocab& vocab, const TokenIndex& index) {
  struct Merge {
    float score;
    TokenId result, left, right;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    if (vocab.types[i] != TokenType::Normal) continue;
    const std::string& t = vocab.tokens[i];
    for (size_t k = unicode::decode_utf8(t, 0).length; k < t.size();
         k += unicode::decode_utf8(t, k).length) {
      const TokenId l = index.find(std::string_view(t).substr(0, k));
      const TokenId r = index.find(std::string_view(t).substr(k));
      if (l >= 0 && r >= 0) merges.push_back({vocab.scores[i], static_cast<TokenId>(i), l, r});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return a.score != b.score ? a.score > b.score : a.result < b.result;
  });
  json out = json::array();
  for (const Merge& m : merges) out.push_back({vocab.tokens[m.left], vocab.tokens[m.right]});
  return out;
}

json byte_level_merges(const Vocab& vocab) {
  json out = json::array();
  for (const std::string& m : vocab.merges) {
    const size_t sep = m.find(' ', 1);
    if (sep == std::string::npos) continue;
    out.push_back({m.substr(0, sep), m.substr(sep + 1)});
  }
  return out;
}

json name_or_null(const Vocab& vocab, TokenId id) {
  return id >= 0 ? json(vocab.tokens[id]) : json(nullptr);
}

// Adds BOS (and EOS) around a single sequence, as HF does for models that want them.
json post_processor(const Vocab& vocab) {
  const bool bos = vocab.add_bos && vocab.bos >= 0, eos = vocab.add_eos && vocab.eos >= 0;
  if (!bos && !eos) return nullptr;
  json specials = json::object();
  auto special = [&](TokenId id) {
    const std::string& name = vocab.tokens[id];
    specials[name] = {{"id", name}, {"ids", {id}}, {"tokens", {name}}};
    return json{{"SpecialToken", {{"id", name}, {"type_id", 0}}}};
  };
  auto sequence_template = [&](const char* seq, int type_id) {
    json parts = json::array();
    if (bos) parts.push_back(special(vocab.bos));
    parts.push_back({{"Sequence", {{"id", seq}, {"type_id", type_id}}}});
    if (eos) parts.push_back(special(vocab.eos));
    return parts;
  };
  const json single = sequence_template("A", 0);
  json pair = single;
  for (const json& part : sequence_template("B", 1)) pair.push_back(part);
  return {{"type", "TemplateProcessing"},
          {"single", single},
          {"pair", pair},
          {"special_tokens", specials}};
}

}  // namespace

void write_hf_tokenizer_json(const Vocab& vocab, const std::string& path) {
  const bool spm = vocab.kind == Vocab::Kind::Spm;
  const size_t n = vocab.tokens.size();
  if (vocab.types.size() != n || (spm && vocab.scores.size() != n)) {
    fail(path, ": vocabulary has ", n, " tokens but ", vocab.types.size(), " types and ",
         vocab.scores.size(), " scores");
  }
  const TokenIndex index(vocab.tokens);
  json added = json::array();
  json model_vocab = json::object();
  for (size_t i = 0; i < n; ++i) {
    const TokenType type = vocab.types[i];
    const std::string& text = vocab.tokens[i];
    if (!model_vocab.contains(text)) model_vocab[text] = i;
    if (type == TokenType::Control || type == TokenType::UserDefined ||
        type == TokenType::Unknown) {
      added.push_back({{"id", i},
                       {"content", text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type != TokenType::UserDefined}});
    }
  }

  json root = {
      {"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added}};
  json model = {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", model_vocab}};
  if (spm) {
    json normalizers = json::array();
    if (vocab.add_space_prefix)
      normalizers.push_back({{"type", "Prepend"}, {"prepend", kMetaspace}});
    normalizers.push_back(
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMetaspace}});
    json decoders = json::array({
        {{"type", "Replace"}, {"pattern", {{"String", kMetaspace}}}, {"content", " "}},
        {{"type", "ByteFallback"}},
        {{"type", "Fuse"}},
    });
    if (vocab.add_space_prefix) {
      decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    }
    root["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
    root["pre_tokenizer"] = nullptr;
    root["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
    model["unk_token"] = name_or_null(vocab, vocab.unk);
    model["continuing_subword_prefix"] = nullptr;
    model["end_of_word_suffix"] = nullptr;
    model["fuse_unk"] = true;
    model["byte_fallback"] = true;
    model["ignore_merges"] = false;
    model["merges"] = spm_merges(vocab, index);
  } else {
    const PreTokenizerKind kind = pre_tokenizer_from_name(vocab.pre);
    if (!pre_tokenizer_byte_level(kind)) {
      fail(path, ": writing a '", vocab.pre, "' vocabulary as tokenizer.json is not supported");
    }
    root["normalizer"] = nullptr;
    root["pre_tokenizer"] = pre_tokenizer_json(kind);
    root["decoder"] = {{"type", "ByteLevel"},
                       {"add_prefix_space", false},
                       {"trim_offsets", false},
                       {"use_regex", false}};
    model["unk_token"] = nullptr;
    model["continuing_subword_prefix"] = "";
    model["end_of_word_suffix"] = "";
    model["fuse_unk"] = false;
    model["byte_fallback"] = false;
    model["ignore_merges"] = pre_tokenizer_ignores_merges(kind);
    model["merges"] = byte_level_merges(vocab);
  }
  root["post_processor"] = post_processor(vocab);
  root["model"] = model;
  save_json(root, path);

  json config = {{"add_bos_token", vocab.add_bos},
                 {"add_eos_token", vocab.add_eos},
                 {"bos_token", name_or_null(vocab, vocab.bos)},
                 {"eos_token", name_or_null(vocab, vocab.eos)},
                 {"unk_token", name_or_null(vocab, vocab.unk)},
                 {"pad_token", name_or_null(vocab, vocab.pad)},
                 {"clean_up_tokenization_spaces", false},
                 {"model_max_length", 1000000000},
                 {"tokenizer_class", "PreTrainedTokenizerFast"}};
  if (vocab.named_chat_templates.empty()) {
    if (!vocab.chat_template.empty()) config["chat_template"] = vocab.chat_template;
  } else {
    json list = json::array();
    if (!vocab.chat_template.empty()) {
      list.push_back({{"name", "default"}, {"template", vocab.chat_template}});
    }
    for (const auto& [name, text] : vocab.named_chat_templates) {
      list.push_back({{"name", name}, {"template", text}});
    }
    config["chat_template"] = list;
  }
  save_json(config, (fs::path(path).parent_path() / "tokenizer_config.json").string());
}

}  // namespace k25
