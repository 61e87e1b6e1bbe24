#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace k25 {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD

TEST(Utf8StreamDecoder, PassesAsciiAndCompleteCharacters) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.push("hi "), "hi ");
  EXPECT_EQ(d.push("\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99"), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99");
  EXPECT_EQ(d.flush(), "");
}

TEST(Utf8StreamDecoder, HoldsSplitCharactersUntilComplete) {
  Utf8StreamDecoder d;
  // "🦙" (F0 9F A6 99) arriving one byte at a time, after some text.
  EXPECT_EQ(d.push("a\xF0"), "a");
  EXPECT_EQ(d.push("\x9F"), "");
  EXPECT_EQ(d.push("\xA6"), "");
  EXPECT_EQ(d.push("\x99!"), "\xF0\x9F\xA6\x99!");
  // "€" split 1 + 2.
  EXPECT_EQ(d.push("\xE2"), "");
  EXPECT_EQ(d.push("\x82\xAC"), "\xE2\x82\xAC");
  EXPECT_EQ(d.push(""), "");
  EXPECT_EQ(d.flush(), "");
}

TEST(Utf8StreamDecoder, ReplacesInvalidBytes) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.push("a\xFF"
                   "b"),
            "a" + kReplacement + "b");                         // never valid
  EXPECT_EQ(d.push("\x80"), kReplacement);                     // stray continuation
  EXPECT_EQ(d.push("\xC0\xAF"), kReplacement + kReplacement);  // overlong '/'
  EXPECT_EQ(d.push("\xED\xA0\x80"), kReplacement + kReplacement + kReplacement);  // surrogate
  // A lead byte followed by a non-continuation: the lead alone is replaced, "x" survives.
  EXPECT_EQ(d.push("\xE2\x82x"), kReplacement + "x");
  EXPECT_EQ(d.push("\xF4\x90\x80\x80"), kReplacement + kReplacement + kReplacement + kReplacement);
}

TEST(Utf8StreamDecoder, FlushReplacesAnUnfinishedCharacter) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.push("ok\xE2\x82"), "ok");
  EXPECT_EQ(d.flush(), kReplacement);
  EXPECT_EQ(d.flush(), "");
  // The decoder is reusable after a flush.
  EXPECT_EQ(d.push("\xC3"), "");
  EXPECT_EQ(d.push("\xA9"), "\xC3\xA9");
}

TEST(Utf8StreamDecoder, CharacterClasses) {
  EXPECT_TRUE(unicode::is_letter('a'));
  EXPECT_TRUE(unicode::is_letter(0x4E2D));   // 中
  EXPECT_TRUE(unicode::is_letter(0x17A2));   // Khmer letter
  EXPECT_FALSE(unicode::is_letter(0x17B6));  // Khmer vowel sign (Mc)
  EXPECT_TRUE(unicode::is_number(0xBD));     // ½
  EXPECT_TRUE(unicode::is_number(0x0663));   // Arabic-Indic three
  EXPECT_FALSE(unicode::is_number('x'));
  EXPECT_TRUE(unicode::is_whitespace(0x3000));
  EXPECT_TRUE(unicode::is_whitespace(0x85));
  EXPECT_FALSE(unicode::is_whitespace(0x200B));  // zero width space is not White_Space
  EXPECT_FALSE(unicode::is_letter(0x1F999));
}

}  // namespace
}  // namespace k25
