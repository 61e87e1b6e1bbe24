#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/error.h"
#include "formats/gguf.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/tokenizer_pretokenizer.h"
#include "tokenizer/vocab_metadata.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

const std::string kShared = K25_SHARED_DIR;
const std::string kVocabDir = kShared + "/tokenizers/llamacpp-vocab/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The .inp test strings: each is followed by the separator, except in gemma-4's file, whose last
// test has none (a non-empty piece after the last separator is a test; an empty one is not).
std::vector<std::string> read_inputs(const std::string& path) {
  const std::string text = read_file(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t hit; (hit = text.find(sep, start)) != std::string::npos; start = hit + sep.size()) {
    out.push_back(text.substr(start, hit - start));
  }
  if (start < text.size()) out.push_back(text.substr(start));
  return out;
}

std::vector<std::vector<TokenId>> read_outputs(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<TokenId>> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream ids(line);
    out.emplace_back();
    for (TokenId id; ids >> id;) out.back().push_back(id);
  }
  return out;
}

#define REQUIRE_SHARED(path) \
  if (!fs::exists(path))     \
  GTEST_SKIP() << "MISSING SHARED TEST DATA: " << (path) << " (tokenizer checks were NOT run)"

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path) {
  return Tokenizer::from_gguf(*GgufFile::open(path));
}

// Encodes every test string of <name>.gguf.inp and compares with .out; reports every failure.
void expect_vectors(const Tokenizer& tok, const std::string& name) {
  const auto inputs = read_inputs(kVocabDir + name + ".gguf.inp");
  const auto expected = read_outputs(kVocabDir + name + ".gguf.out");
  // qwen35 adds 4 tests with combining marks (not NFC) to the common 46.
  ASSERT_EQ(inputs.size(), name == "ggml-vocab-qwen35" ? 50u : 46u);
  ASSERT_EQ(expected.size(), inputs.size());
  int passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto ids = tok.encode(inputs[i], false, false);
    EXPECT_EQ(ids, expected[i]) << name << " test " << i << ": '" << inputs[i] << "'";
    passed += ids == expected[i];
  }
  std::cout << name << ": " << passed << "/" << inputs.size() << " test vectors pass\n";
}

class TokenizerVocabTest : public testing::TestWithParam<std::string> {};
// Vocabularies k25 writes as tokenizer.json: all but Gemma 4's (BPE over raw UTF-8).
class TokenizerHfWritableVocabTest : public TokenizerVocabTest {};
// Vocabularies with a normal token for every byte. deepseek-llm marks the characters of the bytes
// that never occur in UTF-8 (0xC0, 0xC1, 0xF5-0xFF) user-defined, so they decode as their text;
// starcoder and falcon lack some bytes (they become unk / nothing, as in llama.cpp).
class TokenizerByteCompleteVocabTest : public TokenizerVocabTest {};

TEST_P(TokenizerVocabTest, EncodesLlamaCppTestVectors) {
  const std::string path = kVocabDir + GetParam() + ".gguf";
  REQUIRE_SHARED(path);
  expect_vectors(*load_gguf_tokenizer(path), GetParam());
}

TEST_P(TokenizerVocabTest, DecodeInvertsEncode) {
  const std::string path = kVocabDir + GetParam() + ".gguf";
  REQUIRE_SHARED(path);
  const auto tok = load_gguf_tokenizer(path);
  const bool spm = tok->vocab().kind == Vocab::Kind::Spm;
  for (const std::string& text : read_inputs(path + ".inp")) {
    // SentencePiece's space prefix comes back as a leading space.
    const std::string expected = spm && !text.empty() ? " " + text : text;
    EXPECT_EQ(tok->decode(tok->encode(text, false, false)), expected);
  }
}

TEST_P(TokenizerHfWritableVocabTest, HfJsonWriterRoundTrips) {
  const std::string path = kVocabDir + GetParam() + ".gguf";
  REQUIRE_SHARED(path);
  const auto tok = load_gguf_tokenizer(path);
  const fs::path dir = fs::path(testing::TempDir()) / ("k25-hf-" + GetParam());
  fs::create_directories(dir);
  write_hf_tokenizer_json(tok->vocab(), (dir / "tokenizer.json").string());
  ASSERT_TRUE(fs::exists(dir / "tokenizer_config.json"));
  const auto back = Tokenizer::from_hf_json((dir / "tokenizer.json").string());
  EXPECT_EQ(back->vocab().kind, tok->vocab().kind);
  EXPECT_EQ(back->n_vocab(), tok->n_vocab());
  EXPECT_EQ(back->bos(), tok->bos());
  EXPECT_EQ(back->eos(), tok->eos());
  EXPECT_EQ(back->vocab().add_bos, tok->vocab().add_bos);
  expect_vectors(*back, GetParam());
  for (const char* text : {"Hello world", "<|im_start|>hi<s></s>", "  x\n\ny"}) {
    EXPECT_EQ(back->encode(text, true, true), tok->encode(text, true, true)) << text;
  }
  fs::remove_all(dir);
}

// Byte fallback (SPM) and the byte-level map (BPE) make any byte string, valid UTF-8 or not,
// come back unchanged.
TEST_P(TokenizerByteCompleteVocabTest, RandomBytesRoundTrip) {
  const std::string path = kVocabDir + GetParam() + ".gguf";
  REQUIRE_SHARED(path);
  const auto tok = load_gguf_tokenizer(path);
  const bool spm = tok->vocab().kind == Vocab::Kind::Spm;
  std::mt19937 rng(1234);
  for (int round = 0; round < 50; ++round) {
    std::string text(rng() % 64, '\0');
    for (char& c : text) {
      // Mostly ASCII letters and spaces, with some raw high bytes.
      const uint32_t r = rng();
      c = static_cast<char>(r % 4 == 0   ? 0x80 + (r >> 8) % 128
                            : r % 4 == 1 ? ' '
                                         : 'a' + (r >> 8) % 26);
    }
    const std::string expected = spm && !text.empty() ? " " + text : text;
    EXPECT_EQ(tok->decode(tok->encode(text, false, false)), expected) << round;
  }
}

std::string vocab_test_name(const testing::TestParamInfo<std::string>& info) {
  std::string name = info.param.substr(11);
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
}

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, TokenizerVocabTest,
                         testing::Values("ggml-vocab-gpt-2", "ggml-vocab-llama-bpe",
                                         "ggml-vocab-llama-spm", "ggml-vocab-qwen2",
                                         "ggml-vocab-phi-3", "ggml-vocab-qwen35",
                                         "ggml-vocab-gemma-4", "ggml-vocab-deepseek-llm",
                                         "ggml-vocab-starcoder", "ggml-vocab-falcon"),
                         vocab_test_name);
INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, TokenizerHfWritableVocabTest,
                         testing::Values("ggml-vocab-gpt-2", "ggml-vocab-llama-bpe",
                                         "ggml-vocab-llama-spm", "ggml-vocab-qwen2",
                                         "ggml-vocab-phi-3", "ggml-vocab-qwen35",
                                         "ggml-vocab-deepseek-llm", "ggml-vocab-starcoder",
                                         "ggml-vocab-falcon"),
                         vocab_test_name);
INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, TokenizerByteCompleteVocabTest,
                         testing::Values("ggml-vocab-gpt-2", "ggml-vocab-llama-bpe",
                                         "ggml-vocab-llama-spm", "ggml-vocab-qwen2",
                                         "ggml-vocab-phi-3", "ggml-vocab-qwen35",
                                         "ggml-vocab-gemma-4"),
                         vocab_test_name);

TEST(TokenizerGguf, AddsBosAsLlamaCppDoes) {
  const std::string path = kVocabDir + "ggml-vocab-llama-bpe.gguf";
  REQUIRE_SHARED(path);
  const auto llama3 = load_gguf_tokenizer(path);
  EXPECT_EQ(llama3->encode("Hello", true, false), (std::vector<TokenId>{128000, 9906}));
  EXPECT_TRUE(llama3->is_end_of_generation(128001));  // <|end_of_text|> (EOS)
  EXPECT_TRUE(llama3->is_end_of_generation(128009));  // <|eot_id|>
  EXPECT_FALSE(llama3->is_end_of_generation(9906));
  // <|eot_id|> is a control token: text only with parse_special.
  EXPECT_EQ(llama3->encode("<|eot_id|>", false, true), (std::vector<TokenId>{128009}));
  EXPECT_NE(llama3->encode("<|eot_id|>", false, false), (std::vector<TokenId>{128009}));
  EXPECT_EQ(llama3->token_to_piece(128009, false), "");
  EXPECT_EQ(llama3->token_to_piece(128009, true), "<|eot_id|>");

  const auto qwen2 = load_gguf_tokenizer(kVocabDir + "ggml-vocab-qwen2.gguf");
  EXPECT_EQ(qwen2->encode("Hello", true, false), qwen2->encode("Hello", false, false));
  EXPECT_TRUE(qwen2->is_end_of_generation(151645));  // <|im_end|>
  EXPECT_EQ(qwen2->encode("<|im_start|>user\nhi<|im_end|>", false, true),
            (std::vector<TokenId>{151644, 872, 198, 6023, 151645}));
}

TEST(TokenizerGguf, SpmBytesAndSpecials) {
  const std::string path = kVocabDir + "ggml-vocab-llama-spm.gguf";
  REQUIRE_SHARED(path);
  const auto tok = load_gguf_tokenizer(path);
  EXPECT_EQ(tok->encode("Hello world", true, false), (std::vector<TokenId>{1, 15043, 3186}));
  EXPECT_EQ(tok->encode("\n", false, false), (std::vector<TokenId>{29871, 13}));
  EXPECT_EQ(tok->token_to_piece(13), "\n");  // <0x0A>
  EXPECT_EQ(tok->token_to_piece(15043), " Hello");
  EXPECT_EQ(tok->token_to_piece(1, false), "");
  EXPECT_EQ(tok->token_to_piece(1, true), "<s>");
  // After a special token SentencePiece prefixes a space again.
  EXPECT_EQ(tok->encode("<s>Hello", false, true), (std::vector<TokenId>{1, 15043}));
  EXPECT_TRUE(tok->is_end_of_generation(2));
  EXPECT_THROW(tok->token_to_piece(32000), Error);
}

TEST(TokenizerGguf, Gemma4AndPhi3Specials) {
  const std::string gemma_path = kVocabDir + "ggml-vocab-gemma-4.gguf";
  const std::string phi3_path = kVocabDir + "ggml-vocab-phi-3.gguf";
  REQUIRE_SHARED(gemma_path);
  const auto gemma = load_gguf_tokenizer(gemma_path);
  EXPECT_EQ(gemma->vocab().pre, "gemma4");  // the file has no tokenizer.ggml.pre
  EXPECT_TRUE(gemma->vocab().add_bos);
  const auto hello = gemma->encode("Hello world", false, false);
  auto with_bos = hello;
  with_bos.insert(with_bos.begin(), 2);
  EXPECT_EQ(gemma->encode("Hello world", true, false), with_bos);
  EXPECT_EQ(gemma->decode(hello), "Hello world");  // "▁" comes back as a space, no prefix
  // A character the vocabulary lacks falls back to its <0xNN> byte tokens.
  const auto bytes = gemma->encode("\xF4\x8F\xBF\xBF", false, false);
  EXPECT_EQ(bytes, (std::vector<TokenId>{238 + 0xF4, 238 + 0x8F, 238 + 0xBF, 238 + 0xBF}));
  EXPECT_TRUE(gemma->is_end_of_generation(106));  // <turn|>
  EXPECT_TRUE(gemma->is_end_of_generation(1));    // <eos>
  EXPECT_EQ(gemma->encode("<|turn>", false, true), (std::vector<TokenId>{105}));

  REQUIRE_SHARED(phi3_path);
  const auto phi3 = load_gguf_tokenizer(phi3_path);
  EXPECT_TRUE(phi3->is_end_of_generation(32007));  // <|end|>
  const auto turn = phi3->encode("<|user|>\nhi<|end|>", false, true);
  ASSERT_GE(turn.size(), 3u);
  EXPECT_EQ(turn.front(), 32010);
  EXPECT_EQ(turn.back(), 32007);
}

// Copies a GGUF vocabulary with another tokenizer.ggml.pre (as tools/k25-vocab-gguf does).
std::string write_with_pre(const std::string& from, const std::string& pre) {
  const auto in = GgufFile::open(from);
  GgufWriter w;
  for (const auto& [key, value] : in->metadata()) w.set(key, value);
  w.set_string("tokenizer.ggml.pre", pre);
  const std::string path = (fs::path(testing::TempDir()) / ("k25-vocab-" + pre + ".gguf")).string();
  w.write(path);
  return path;
}

// smollm and tekken have no fixture: GPT-2's vocabulary with their pre-tokenizer names.
TEST(TokenizerGguf, SmollmAndTekkenPreTokenizers) {
  const std::string gpt2 = kVocabDir + "ggml-vocab-gpt-2.gguf";
  REQUIRE_SHARED(gpt2);
  const auto smollm = load_gguf_tokenizer(write_with_pre(gpt2, "smollm"));
  const auto tekken = load_gguf_tokenizer(write_with_pre(gpt2, "tekken"));
  const auto plain = load_gguf_tokenizer(gpt2);
  using V = std::vector<TokenId>;
  EXPECT_EQ(plain->encode("abc123", false, false), (V{39305, 10163}));        // abc 123
  EXPECT_EQ(smollm->encode("abc123", false, false), (V{39305, 16, 17, 18}));  // abc 1 2 3
  EXPECT_FALSE(smollm->vocab().add_bos);
  EXPECT_EQ(plain->encode(" 12", false, false), (V{1105}));          // " 12"
  EXPECT_EQ(tekken->encode(" 12", false, false), (V{220, 16, 17}));  // " " 1 2
  EXPECT_EQ(tekken->encode("HelloWorld", false, false), (V{15496, 10603}));
  // Tekken adds BOS by default (llama.cpp), and GPT-2's BOS is id 50256.
  EXPECT_TRUE(tekken->vocab().add_bos);
  EXPECT_EQ(tekken->encode("HelloWorld", true, false), (V{50256, 15496, 10603}));
  fs::remove(fs::path(testing::TempDir()) / "k25-vocab-smollm.gguf");
  fs::remove(fs::path(testing::TempDir()) / "k25-vocab-tekken.gguf");
}

TEST(TokenizerHfJson, Gemma4IsNotWritten) {
  const std::string path = kVocabDir + "ggml-vocab-gemma-4.gguf";
  REQUIRE_SHARED(path);
  const auto tok = load_gguf_tokenizer(path);
  const fs::path out = fs::path(testing::TempDir()) / "k25-hf-gemma4-write" / "tokenizer.json";
  fs::create_directories(out.parent_path());
  try {
    write_hf_tokenizer_json(tok->vocab(), out.string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemma4"), std::string::npos) << e.what();
  }
  fs::remove_all(out.parent_path());
}

// Errors from GGUF metadata name the file and the offending value.
TEST(TokenizerGguf, RejectsUnsupportedMetadata) {
  const fs::path path = fs::path(testing::TempDir()) / "k25-tok-bad.gguf";
  auto expect_error = [&](const std::string& model, const std::string& pre,
                          std::vector<double> scores, const std::string& needle) {
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", model);
    w.set_string("tokenizer.ggml.pre", pre);
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
    w.set_f32_array("tokenizer.ggml.scores", std::move(scores));
    w.write(path.string());
    try {
      load_gguf_tokenizer(path.string());
      ADD_FAILURE() << "no error for " << model << "/" << pre;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    }
  };
  expect_error("bert", "default", {0, 0}, "'bert'");
  expect_error("gpt2", "mystery", {0, 0}, "'mystery'");
  expect_error("llama", "default", {0}, "tokenizer.ggml.scores");  // one score, two tokens
  fs::remove(path);
}

TEST(TokenizerGguf, Stories260K) {
  const std::string path = kShared + "/models/stories260K.gguf";
  const std::string sample = kShared + "/reference/stories-sample-tokens.txt";
  REQUIRE_SHARED(path);
  const auto tok = load_gguf_tokenizer(path);
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->encode("Once upon a time", true, false),
            (std::vector<TokenId>{1, 403, 407, 261, 378}));
  REQUIRE_SHARED(sample);
  std::ifstream in(sample);
  std::vector<TokenId> expected;
  for (TokenId id; in >> id;) expected.push_back(id);
  ASSERT_EQ(expected.size(), 8366u);
  std::string text = read_file(kShared + "/data/stories-sample.txt");
  if (!text.empty() && text.back() == '\n') text.pop_back();
  EXPECT_EQ(tok->encode(text, true, false), expected);
}

TEST(TokenizerHfJson, Qwen3MatchesQwen2Vectors) {
  const std::string path = kShared + "/tokenizers/qwen3/tokenizer.json";
  REQUIRE_SHARED(path);
  const auto tok = Tokenizer::from_hf_json(path);
  EXPECT_EQ(tok->vocab().kind, Vocab::Kind::Bpe);
  EXPECT_EQ(tok->vocab().pre, "qwen2");
  EXPECT_EQ(tok->n_vocab(), 151669);
  EXPECT_FALSE(tok->vocab().add_bos);
  EXPECT_EQ(tok->eos(), 151645);  // tokenizer_config.json: eos_token <|im_end|>
  EXPECT_EQ(tok->vocab().pad, 151643);
  EXPECT_FALSE(tok->vocab().chat_template.empty());
  expect_vectors(*tok, "ggml-vocab-qwen2");
  EXPECT_EQ(tok->encode("<|im_start|>user\nhi<|im_end|>", true, true),
            (std::vector<TokenId>{151644, 872, 198, 6023, 151645}));
  EXPECT_TRUE(tok->is_end_of_generation(151645));
  EXPECT_TRUE(tok->is_end_of_generation(151643));  // <|endoftext|>
}

// Writes a tokenizer.json into a fresh temporary directory and returns its path.
std::string write_temp_json(const std::string& name, const std::string& body) {
  const fs::path dir = fs::path(testing::TempDir()) / ("k25-hf-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << body;
  return (dir / "tokenizer.json").string();
}

TEST(TokenizerHfJson, RejectsBadFiles) {
  EXPECT_THROW(Tokenizer::from_hf_json("/nonexistent/tokenizer.json"), Error);
  const std::pair<const char*, const char*> cases[] = {
      {"{", "invalid JSON"},
      {"[]", "no \"model\""},
      {R"({"model": {"type": "WordPiece", "vocab": {}}})", "'WordPiece'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
             {"type": "Split", "pattern": {"Regex": "\\w+"}}, {"type": "ByteLevel"}]}})",
       "regex"},
      {R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []},
           "pre_tokenizer": {"type": "ByteLevel"}})",
       "'a'"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]},
           "pre_tokenizer": {"type": "ByteLevel"}})",
       "merge"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})", "byte_fallback"},
  };
  for (const auto& [body, needle] : cases) {
    const std::string path = write_temp_json("bad", body);
    try {
      Tokenizer::from_hf_json(path);
      ADD_FAILURE() << "no error for " << body;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

// GPT-2 style: ByteLevel pre-tokenizer with its built-in regex, "a b" merge strings, and a
// non-special added token that is matched even without parse_special.
TEST(TokenizerHfJson, ReadsStringMergesAndAddedTokens) {
  const std::string path = write_temp_json("gpt2-mini", R"({
    "added_tokens": [{"id": 4, "content": "<x>", "special": false},
                     {"id": 5, "content": "<|endoftext|>", "special": true}],
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3},
              "merges": ["a b"]}})");
  const auto tok = Tokenizer::from_hf_json(path);
  EXPECT_EQ(tok->vocab().pre, "gpt-2");
  EXPECT_EQ(tok->n_vocab(), 6);
  EXPECT_EQ(tok->eos(), 5);  // no tokenizer_config.json: the conventional name
  EXPECT_FALSE(tok->vocab().add_bos);
  EXPECT_EQ(tok->encode("ab<x> ab", true, false), (std::vector<TokenId>{2, 4, 3, 2}));
  EXPECT_EQ(tok->encode("<|endoftext|>", false, true), (std::vector<TokenId>{5}));
  EXPECT_EQ(tok->decode({2, 4, 3, 2, 5}, false), "ab<x> ab");
  fs::remove_all(fs::path(path).parent_path());
}

// GGUF tokenizer.chat_template.<name> keys are the named variants; set_vocab_metadata writes
// them back, and one that is not a string is an error naming the key.
TEST(TokenizerGguf, NamedChatTemplates) {
  const auto stories = GgufFile::open(kShared + "/models/stories260K.gguf");
  const fs::path dir = fs::path(testing::TempDir()) / "k25-named-templates";
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::function<void(GgufWriter&)>& extra) {
    GgufWriter w;
    for (const auto& [key, value] : stories->metadata()) w.set(key, value);
    extra(w);
    const std::string path = (dir / name).string();
    w.write(path);
    return path;
  };
  const std::string path = write("named.gguf", [](GgufWriter& w) {
    w.set_string("tokenizer.chat_template", "D");
    w.set_string("tokenizer.chat_template.tool_use", "T");
    w.set_string("tokenizer.chat_template.rag", "R");
  });
  const auto tok = Tokenizer::from_gguf(*GgufFile::open(path));
  EXPECT_EQ(tok->vocab().chat_template, "D");
  const std::map<std::string, std::string> expected = {{"rag", "R"}, {"tool_use", "T"}};
  EXPECT_EQ(tok->vocab().named_chat_templates, expected);

  GgufWriter again;
  set_vocab_metadata(again, tok->vocab());
  const std::string again_path = (dir / "again.gguf").string();
  again.write(again_path);
  EXPECT_EQ(Tokenizer::from_gguf(*GgufFile::open(again_path))->vocab().named_chat_templates,
            expected);

  const std::string bad =
      write("bad.gguf", [](GgufWriter& w) { w.set_u32("tokenizer.chat_template.tool_use", 1); });
  try {
    Tokenizer::from_gguf(*GgufFile::open(bad));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'tokenizer.chat_template.tool_use'"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

// tokenizer_config.json's list of named templates: "default" is the template, the others are
// kept by name (and written back as a list); without "default" the first entry is the template.
TEST(TokenizerHfJson, NamedChatTemplateList) {
  const std::string path = write_temp_json("named-templates", R"({
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "<|endoftext|>": 2}, "merges": []}})");
  const fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
  std::ofstream(config) << R"({"chat_template": [
      {"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"},
      {"name": "rag", "template": "R"}]})";
  const std::map<std::string, std::string> expected = {{"rag", "R"}, {"tool_use", "T"}};
  const auto tok = Tokenizer::from_hf_json(path);
  EXPECT_EQ(tok->vocab().chat_template, "D");
  EXPECT_EQ(tok->vocab().named_chat_templates, expected);

  const std::string copy = write_temp_json("named-templates-copy", "{}");
  write_hf_tokenizer_json(tok->vocab(), copy);
  const auto back = Tokenizer::from_hf_json(copy);
  EXPECT_EQ(back->vocab().chat_template, "D");
  EXPECT_EQ(back->vocab().named_chat_templates, expected);

  std::ofstream(config) << R"({"chat_template": [{"name": "tool_use", "template": "T"}]})";
  EXPECT_EQ(Tokenizer::from_hf_json(path)->vocab().chat_template, "T");

  for (const char* bad : {R"({"chat_template": [{"name": "a", "template": "T"}, {"name": 1}]})",
                          R"({"chat_template": 5})"}) {
    std::ofstream(config) << bad;
    try {
      Tokenizer::from_hf_json(path);
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("chat_template"), std::string::npos) << e.what();
    }
  }
  fs::remove_all(fs::path(path).parent_path());
  fs::remove_all(fs::path(copy).parent_path());
}

// The pre_tokenizer Sequences of the published tokenizer.json files map to k25's pre-tokenisers.
TEST(TokenizerHfJson, DetectsPreTokenizerSequences) {
  auto split = [](const std::string& regex) {
    return nlohmann::json{{"type", "Split"},
                          {"pattern", {{"Regex", regex}}},
                          {"behavior", "Isolated"},
                          {"invert", false}}
        .dump();
  };
  const std::string byte_level = R"({"type": "ByteLevel", "use_regex": false})";
  const std::string byte_level_regex = R"({"type": "ByteLevel", "use_regex": true})";
  const std::pair<std::string, const char*> cases[] = {
      // Mistral-Nemo (tekken)
      {split(R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)"
             R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|)"
             R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)") +
           "," + byte_level,
       "tekken"},
      // SmolLM, StarCoder 2
      {R"({"type": "Digits", "individual_digits": true},)" + byte_level_regex, "starcoder"},
      // Falcon
      {R"({"type": "Punctuation", "behavior": "Contiguous"},)" + byte_level_regex +
           R"(,{"type": "Digits", "individual_digits": false},)" + split("[0-9][0-9][0-9]"),
       "falcon"},
      // Qwen3.5
      {split(R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|)"
             R"( ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)") +
           "," + byte_level,
       "qwen35"},
      {byte_level_regex, "gpt-2"},
  };
  for (const auto& [steps, pre] : cases) {
    const std::string path = write_temp_json(
        "pre", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [)" + steps +
                   R"(]}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
    EXPECT_EQ(Tokenizer::from_hf_json(path)->vocab().pre, pre) << steps;
  }
  // Known steps in an unknown order are refused.
  const std::string path = write_temp_json(
      "pre-bad", R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [)" + byte_level_regex +
                     R"(, {"type": "Digits", "individual_digits": true}]},
          "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  try {
    Tokenizer::from_hf_json(path);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence"), std::string::npos) << e.what();
  }
}

// A hand-built SentencePiece vocabulary: merges follow scores, unknown characters become bytes.
TEST(TokenizerSpm, MergesByScoreAndFallsBackToBytes) {
  Vocab v;
  v.kind = Vocab::Kind::Spm;
  v.tokens = {"<unk>",
              "<s>",
              "</s>",
              "\xE2\x96\x81",
              "a",
              "b",
              "ab",
              "\xE2\x96\x81"
              "a",
              "bb"};
  v.scores = {0, 0, 0, -1, -1, -1, -3, -2, -5};
  v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control,
             TokenType::Normal,  TokenType::Normal,  TokenType::Normal,
             TokenType::Normal,  TokenType::Normal,  TokenType::Normal};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.tokens.push_back(name);
    v.scores.push_back(0);
    v.types.push_back(TokenType::Byte);
  }
  v.unk = 0;
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  v.add_space_prefix = true;
  const Tokenizer tok(v);
  // "▁ab": "▁a" (-2) beats "ab" (-3); then "b".
  EXPECT_EQ(tok.encode("ab", true, false), (std::vector<TokenId>{1, 7, 5}));
  // "abb": "ab" (-3) beats "bb" (-5), leftmost first.
  EXPECT_EQ(tok.encode("ab b", false, false), (std::vector<TokenId>{7, 5, 3, 5}));
  // "é" is not in the vocabulary: its two UTF-8 bytes.
  EXPECT_EQ(tok.encode("\xC3\xA9", false, false), (std::vector<TokenId>{3, 9 + 0xC3, 9 + 0xA9}));
  EXPECT_EQ(tok.decode(tok.encode("\xC3\xA9", false, false)), " \xC3\xA9");
  EXPECT_TRUE(tok.encode("", false, false).empty());
  EXPECT_EQ(tok.encode("", true, false), (std::vector<TokenId>{1}));
}

TEST(TokenizerBpe, MergeRankDecidesAndBytesRoundTrip) {
  Vocab v;
  v.kind = Vocab::Kind::Bpe;
  v.pre = "gpt-2";
  // Every byte's byte-level character, then merged pieces.
  for (int b = 0; b < 256; ++b) {
    std::string ch = b == ' ' ? "\xC4\xA0" : "";
    if (ch.empty())
      v.tokens.push_back(std::string(1, static_cast<char>(b)));
    else
      v.tokens.push_back(ch);
  }
  const size_t base = v.tokens.size();
  v.tokens.insert(v.tokens.end(), {"ab", "bc", "abc"});
  v.merges = {"b c", "a b", "a bc"};
  // Only bytes that are printable map to themselves; this vocabulary needs just a, b, c and space.
  const Tokenizer tok(v);
  // "bc" has the best rank, then "a bc".
  EXPECT_EQ(tok.encode("abc", false, false),
            (std::vector<TokenId>{static_cast<TokenId>(base + 2)}));
  EXPECT_EQ(tok.encode("ab", false, false), (std::vector<TokenId>{static_cast<TokenId>(base)}));
  EXPECT_EQ(tok.decode(tok.encode("ab abc", false, false)), "ab abc");
}

TEST(TokenizerPreTokenizer, SplitsLikeTheRegexes) {
  auto split = [](PreTokenizerKind kind, std::string_view text) {
    std::vector<std::string> out;
    for (auto piece : pre_tokenize(kind, text)) out.emplace_back(piece);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(split(PreTokenizerKind::Gpt2, "Hello world's   123!!\n"),
            (V{"Hello", " world", "'s", "  ", " 123", "!!", "\n"}));
  EXPECT_EQ(split(PreTokenizerKind::Llama3, "I'LL pay 12345\n\n  x"),
            (V{"I", "'LL", " pay", " ", "123", "45", "\n\n", " ", " x"}));
  EXPECT_EQ(split(PreTokenizerKind::Qwen2, "a 123"), (V{"a", " ", "1", "2", "3"}));
  EXPECT_EQ(split(PreTokenizerKind::Llama3, "\xD0\xBD\xD0\xB0 (x)"),
            (V{"\xD0\xBD\xD0\xB0", " (", "x", ")"}));
  // Invalid UTF-8 stays in the output.
  EXPECT_EQ(split(PreTokenizerKind::Gpt2,
                  "a\xFF"
                  "b"),
            (V{"a", "\xFF", "b"}));
  EXPECT_THROW(pre_tokenizer_from_name("no-such-pre"), Error);
}

// Hand-checked splits of the pre-tokenisers added for issue 14 (each against its regexes).
TEST(TokenizerPreTokenizer, SplitsLikeTheNewRegexes) {
  auto split = [](PreTokenizerKind kind, std::string_view text) {
    std::vector<std::string> out;
    for (auto piece : pre_tokenize(kind, text)) out.emplace_back(piece);
    return out;
  };
  using V = std::vector<std::string>;
  using K = PreTokenizerKind;
  // "résumé ok" with combining acute accents (U+0301): Qwen3.5 keeps marks inside the word,
  // Qwen2 splits at them.
  const std::string resume = "re\xCC\x81sume\xCC\x81 ok";
  EXPECT_EQ(split(K::Qwen35, resume), (V{"re\xCC\x81sume\xCC\x81", " ok"}));
  EXPECT_EQ(split(K::Qwen2, resume), (V{"re", "\xCC\x81sume", "\xCC\x81", " ok"}));
  // Tekken: a new word at each lower-to-upper change, one digit per word, no contractions,
  // "/" and newlines after a punctuation run.
  EXPECT_EQ(split(K::Tekken, "HelloWorld ABCdef 12 a/b//\n"),
            (V{"Hello", "World", " ABCdef", " ", "1", "2", " a", "/b", "//\n"}));
  EXPECT_EQ(split(K::Tekken, "x ABC it's"), (V{"x", " ABC", " it", "'s"}));
  // Non-ASCII cases: Ä is upper, 中 (Lo) counts as both cases.
  EXPECT_EQ(split(K::Tekken, "\xC3\x84PFELsaft A\xE4\xB8\xAD"),
            (V{"\xC3\x84PFELsaft", " A\xE4\xB8\xAD"}));
  // StarCoder / SmolLM: every digit alone, then GPT-2.
  EXPECT_EQ(split(K::Starcoder, "abc123 4"), (V{"abc", "1", "2", "3", " ", "4"}));
  EXPECT_EQ(split(K::Gpt2, "abc123 4"), (V{"abc", "123", " 4"}));
  // Falcon: punctuation runs (with $+<=>^~|`), then GPT-2, then groups of three digits.
  EXPECT_EQ(split(K::Falcon, "a+=b 12345"), (V{"a", "+=", "b", " ", "123", "45"}));
  // DeepSeek LLM: its ASCII "punctuation" class includes letters, so a word that starts with a
  // letter outside it splits there (Ä | pfel), as the regexes do.
  EXPECT_EQ(split(K::DeepseekLlm, "Hello, \xE4\xB8\x96\xE7\x95\x8C 123\n  "),
            (V{"Hello", ",", " ", "\xE4\xB8\x96\xE7\x95\x8C", " ", "123", "\n", "  "}));
  EXPECT_EQ(split(K::DeepseekLlm, "\xC3\x84pfel"), (V{"\xC3\x84", "pfel"}));
  // Gemma 4: runs of newlines and of everything else.
  EXPECT_EQ(split(K::Gemma4, "x\n\ny z\n"), (V{"x", "\n\n", "y z", "\n"}));
  for (const char* name :
       {"qwen35", "tekken", "deepseek-llm", "starcoder", "smollm", "falcon", "gemma4"}) {
    EXPECT_NO_THROW(pre_tokenizer_from_name(name)) << name;
  }
  EXPECT_EQ(pre_tokenizer_from_name("smollm"), K::Starcoder);
}

// A long run of spaces that does not end its piece must not make the \s+$ step quadratic.
TEST(TokenizerPreTokenizer, LongWhitespaceRunStaysLinear) {
  const std::string text = std::string(200000, ' ') + "\xE4\xB8\x96";  // spaces, 世
  const auto pieces = pre_tokenize(PreTokenizerKind::DeepseekLlm, text);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].size(), 200000u);
  EXPECT_EQ(pieces[1], "\xE4\xB8\x96");
}

TEST(TokenizerBpe, UnknownPreTokenizerIsAnError) {
  Vocab v;
  v.kind = Vocab::Kind::Bpe;
  v.pre = "mystery";
  v.tokens = {"a"};
  try {
    Tokenizer tok(v);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mystery"), std::string::npos);
  }
}

}  // namespace
}  // namespace k25
