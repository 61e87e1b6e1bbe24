// k25-bench prompt text: cut to an exact token count with the model's tokenizer (stories260K's
// SentencePiece vocabulary from ../shared), approximated by words without one, valid UTF-8.
#include <gtest/gtest.h>

#include <memory>

#include "core/error.h"
#include "formats/gguf.h"
#include "loadgen/prompt_text.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace k25::loadgen {
namespace {

TEST(LoadgenPrompt, ExactTokenCountsWithTokenizer) {
  K25_REQUIRE_SHARED();
  auto tokenizer =
      Tokenizer::from_gguf(*GgufFile::open(testing::shared_path("models/stories260K.gguf")));
  PromptBuilder builder(generated_words(3000, 5) + " Lily's café — naïve ☺ friends.",
                        tokenizer.get());
  ASSERT_TRUE(builder.exact());
  int exact = 0, total = 0;
  for (int n : {2, 3, 17, 100, 211, 1000, 5000}) {
    for (uint64_t offset : {0ull, 13ull, 999ull, 123456789ull}) {
      BuiltPrompt p = builder.build(n, offset);
      ++total;
      exact += p.tokens == n;
      EXPECT_EQ(p.tokens, builder.count(p.text));
      EXPECT_LE(std::abs(p.tokens - n), 1) << n << " at " << offset;
      // Counted as the server does: BOS plus the text's tokens.
      EXPECT_EQ(static_cast<size_t>(p.tokens), tokenizer->encode(p.text, true, false).size());
    }
  }
  EXPECT_GE(exact, total - 1);
}

TEST(LoadgenPrompt, DifferentOffsetsGiveDifferentPrompts) {
  PromptBuilder builder(generated_words(500, 1), nullptr);
  EXPECT_NE(builder.build(50, 1).text, builder.build(50, 2).text);
  EXPECT_EQ(builder.build(50, 3).text, builder.build(50, 3).text);
}

TEST(LoadgenPrompt, WordApproximationWithoutTokenizer) {
  PromptBuilder builder("one two three four five six seven eight", nullptr);
  EXPECT_FALSE(builder.exact());
  BuiltPrompt p = builder.build(8, 0);  // 8 tokens ~ 6 words
  EXPECT_EQ(p.text, "one two three four five six");
  EXPECT_EQ(p.tokens, 8);
  // Long prompts wrap around the text.
  BuiltPrompt wrapped = builder.build(20, 6);
  EXPECT_EQ(wrapped.text.rfind("seven eight\none two", 0), 0u);
  EXPECT_THROW(PromptBuilder("   ", nullptr), Error);
}

TEST(LoadgenPrompt, TrimBrokenUtf8) {
  EXPECT_EQ(trim_broken_utf8("abc"), "abc");
  EXPECT_EQ(trim_broken_utf8("\xa9"
                             "abc"),
            "abc");                                                 // starts inside a character
  EXPECT_EQ(trim_broken_utf8("ab\xe2\x98"), "ab");                  // ends inside ☺
  EXPECT_EQ(trim_broken_utf8("ab\xe2\x98\xba"), "ab\xe2\x98\xba");  // complete ☺
  EXPECT_EQ(trim_broken_utf8("\xc3"), "");
  EXPECT_EQ(trim_broken_utf8(""), "");
}

TEST(LoadgenPrompt, GeneratedWordsAreDeterministicSentences) {
  const std::string a = generated_words(100, 9);
  EXPECT_EQ(a, generated_words(100, 9));
  EXPECT_NE(a, generated_words(100, 10));
  EXPECT_EQ(a.back(), '.');
  EXPECT_TRUE(std::isupper(static_cast<unsigned char>(a[0])));
}

}  // namespace
}  // namespace k25::loadgen
