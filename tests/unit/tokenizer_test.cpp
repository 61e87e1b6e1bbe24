#include "model/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "model/gguf.h"
#include "model/hf_tokenizer_json.h"
#include "model/tokenizer_pretokenizer.h"
#include "util/error.h"

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

// The .inp test strings: each is followed by the separator, so the last piece is empty.
std::vector<std::string> read_inputs(const std::string& path) {
  const std::string text = read_file(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t hit; (hit = text.find(sep, start)) != std::string::npos; start = hit + sep.size()) {
    out.push_back(text.substr(start, hit - start));
  }
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
  ASSERT_EQ(inputs.size(), 46u);
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

TEST_P(TokenizerVocabTest, HfJsonWriterRoundTrips) {
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
TEST_P(TokenizerVocabTest, RandomBytesRoundTrip) {
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

INSTANTIATE_TEST_SUITE_P(LlamaCppVocabs, TokenizerVocabTest,
                         testing::Values("ggml-vocab-gpt-2", "ggml-vocab-llama-bpe",
                                         "ggml-vocab-llama-spm", "ggml-vocab-qwen2"),
                         [](const auto& info) {
                           std::string name = info.param.substr(11);
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

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
