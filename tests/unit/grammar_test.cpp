// GBNF parsing and compiling (grammar.h) and the byte-level matcher (grammar_matcher.h) on a
// small vocabulary of byte tokens.
#include "model/grammar.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "grammar_walk.h"
#include "model/grammar_matcher.h"
#include "model/grammar_sampling.h"
#include "model/json_schema_grammar.h"

namespace k25 {
namespace {

// "</s>" (end of generation), the 256 byte tokens, and a few pieces of several bytes.
std::shared_ptr<const GrammarVocabulary> byte_vocabulary() {
  Vocab v;
  v.tokens.push_back("</s>");
  v.types.push_back(TokenType::Control);
  for (int b = 0; b < 256; ++b) {
    static const char* hex = "0123456789ABCDEF";
    v.tokens.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    v.types.push_back(TokenType::Byte);
  }
  for (const char* piece : {"ab", "abc", "{\"", "\":", "\xC3\xA9", "\xC3", "x\xE2\x82"}) {
    v.tokens.push_back(piece);
    v.types.push_back(TokenType::Normal);
  }
  v.eos = 0;
  static const Tokenizer tokenizer(v);
  static const auto vocabulary = std::make_shared<const GrammarVocabulary>(tokenizer);
  return vocabulary;
}

GrammarMatcher matcher_for(const std::string& gbnf) {
  return GrammarMatcher(compile_gbnf(gbnf), byte_vocabulary(), {0});
}

bool matches(const std::string& gbnf, const std::string& text) {
  GrammarMatcher m = matcher_for(gbnf);
  return m.accept_bytes(text) && m.can_end();
}

bool bit(const std::vector<uint64_t>& bits, TokenId t) {
  return (bits[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
}

// Every answer of `live` (a matcher that has come a long way: its memo of states and masks is
// full of other states) equals that of `fresh` (the same output, fed in one go to a new one).
void expect_same_answers(GrammarMatcher& live, GrammarMatcher& fresh, const std::string& at) {
  ASSERT_EQ(live.can_end(), fresh.can_end()) << at;
  ASSERT_EQ(live.is_complete(), fresh.is_complete()) << at;
  const int64_t to_end = fresh.tokens_to_end();
  ASSERT_EQ(live.tokens_to_end(), to_end) << at;
  if (fresh.is_complete()) return;
  ASSERT_EQ(live.allowed_tokens(), fresh.allowed_tokens()) << at;
  for (TokenId t = 0; t < fresh.n_vocab(); ++t) {
    ASSERT_EQ(live.allows(t), bit(fresh.allowed_tokens(), t)) << at << " token " << t;
    if (fresh.allows(t)) {
      ASSERT_EQ(live.ends_within(t, to_end), fresh.ends_within(t, to_end)) << at << " token " << t;
    }
  }
  for (const int64_t left : {int64_t{0}, to_end - 2, to_end - 1, to_end, to_end + 3})
    ASSERT_EQ(live.allowed_tokens_within(left), fresh.allowed_tokens_within(left))
        << at << " tokens left " << left;
}

std::string error_of(const std::string& gbnf) {
  try {
    compile_gbnf(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "(compiled)";
}

TEST(Gbnf, LiteralsClassesGroupsAndAlternatives) {
  const std::string g = R"(root ::= "ab" [0-9]+ ( "x" | "yz" ) [^a-c\n]? # comment
)";
  EXPECT_TRUE(matches(g, "ab1x"));
  EXPECT_TRUE(matches(g, "ab123yzd"));
  EXPECT_FALSE(matches(g, "ab1xa"));
  EXPECT_FALSE(matches(g, "abx"));
  EXPECT_FALSE(matches(g, "ab1y"));  // a prefix, not a sentence
  EXPECT_TRUE(matcher_for(g).accept_bytes("ab1y"));
}

TEST(Gbnf, RepetitionOperatorsAndCounts) {
  const std::string g = "root ::= \"a\"{2,4} \"b\"* \"c\"{3} \"d\"{2,}\n";
  EXPECT_TRUE(matches(g, "aacccdd"));
  EXPECT_TRUE(matches(g, "aaaabbbcccddddd"));
  EXPECT_FALSE(matches(g, "acccdd"));
  EXPECT_FALSE(matches(g, "aaaaacccdd"));
  EXPECT_FALSE(matches(g, "aaccdd"));
  EXPECT_FALSE(matches(g, "aacccd"));
  EXPECT_TRUE(matches("root ::= \"x\"{,2}\n", ""));
  EXPECT_FALSE(matches("root ::= \"x\"{,2}\n", "xxx"));
}

TEST(Gbnf, RulesSpanLinesAndRecursion) {
  const std::string g = R"gbnf(
# nested parentheses
root ::= item+
item ::=
    "(" item* ")"
  | "."
value ::= | "unused"
)gbnf";
  EXPECT_TRUE(matches(g, "(.(..)())."));
  EXPECT_FALSE(matches(g, "(()"));
  EXPECT_FALSE(matches(g, ")"));
}

TEST(Gbnf, EscapesAndUnicode) {
  EXPECT_TRUE(matches(R"(root ::= "\x41\u00e9\t\"\\" [\]\-])", "A\xC3\xA9\t\"\\]"));
  EXPECT_TRUE(matches(R"(root ::= "\x41\u00e9\t\"\\" [\]\-])", "A\xC3\xA9\t\"\\-"));
  const std::string greek = "root ::= [α-ω]+\n";
  EXPECT_TRUE(matches(greek, "αβγ"));
  EXPECT_FALSE(matches(greek, "abc"));
  // Negated classes and "." take any character in any UTF-8 length, never invalid UTF-8.
  for (const char* s : {"\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "z"}) {
    EXPECT_TRUE(matches("root ::= [^a]\n", s)) << s;
    EXPECT_TRUE(matches("root ::= .\n", s)) << s;
  }
  EXPECT_FALSE(matches("root ::= [^a]\n", "a"));
  EXPECT_FALSE(matches("root ::= .\n", "\xC3"));              // a prefix only
  EXPECT_FALSE(matches("root ::= .\n", "\xFF"));              // never UTF-8
  EXPECT_FALSE(matches("root ::= .\n", "\xED\xA0\x80"));      // a UTF-16 surrogate
  EXPECT_FALSE(matches("root ::= .\n", "\xC0\x80"));          // overlong
  EXPECT_FALSE(matches("root ::= .\n", "\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_TRUE(matches("root ::= [\\U0001F600-\\U0001F64F]\n", "\xF0\x9F\x98\x80"));
}

TEST(Gbnf, ErrorsNameTheLineColumnAndConstruct) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"root ::= \"abc\n", "line 1, column 10: unterminated string literal"},
      {"root ::= [abc\n", "line 1, column 10: unterminated character class"},
      {"root ::= ( \"a\"\n", "line 1, column 10: unclosed '('"},
      {"\nroot ::= other\n", "line 2, column 10: rule 'other' is used but not defined"},
      {"root ::= \"a\"\nroot ::= \"b\"\n", "line 2, column 1: rule 'root' is defined twice"},
      {"start ::= \"a\"\n", "no 'root' rule"},
      {"root ::= \"\\q\"\n", "line 1, column 11: unknown escape '\\q'"},
      {"root ::= \"a\"{3,1}\n", "line 1, column 13: repetition {3,1}: n is below m"},
      {"root ::= \"a\"{99999}\n", "repetition count above the limit of 10000"},
      {"root ::= \"a\"**\n", "a repetition operator cannot follow another"},
      {"root ::= \"a\" b ::= \"c\"\n", "line 1, column 14: rule 'b' must start on a new line"},
      {"root \"a\"\n", "line 1, column 6: expected '::=' after the rule name 'root'"},
      {"root ::= [z-a]\n", "character range end is below its start"},
      {"root ::= \"\\uD800\"\n", "surrogate"},
      {"root ::= \"\xFF\"\n", "invalid UTF-8"},
      {"root ::= )\n", "line 1, column 10: unexpected ')'"},
      {"root ::= [^\\x00-\\U0010FFFF]\n", "character class matches no character"},
      {"root ::= \"a\" root\n", "rule 'root' can never finish"},
  };
  for (const auto& [grammar, expected] : cases) {
    const std::string error = error_of(grammar);
    EXPECT_NE(error.find(expected), std::string::npos) << grammar << "\n  gave: " << error;
    EXPECT_EQ(error.rfind("grammar", 0), 0u) << error;
  }
}

TEST(Gbnf, LeftRecursionIsRefused) {
  EXPECT_NE(error_of("root ::= root \"a\" | \"a\"\n").find("left recursion (root -> root)"),
            std::string::npos);
  // Indirect, and hidden behind a rule that may match nothing.
  const std::string indirect = "root ::= a\na ::= b \"x\"\nb ::= a | \"y\"\n";
  EXPECT_NE(error_of(indirect).find("left recursion (a -> b -> a)"), std::string::npos)
      << error_of(indirect);
  const std::string nullable = "root ::= e root \"x\" | \"y\"\ne ::= \"\" | \"z\"\n";
  EXPECT_NE(error_of(nullable).find("left recursion"), std::string::npos) << error_of(nullable);
  EXPECT_NE(error_of("root ::= (\"\")* root | \"y\"\n").find("left recursion"), std::string::npos);
  // Right recursion is fine.
  EXPECT_TRUE(matches("root ::= \"a\" root | \"b\"\n", "aaab"));
}

TEST(Gbnf, SizeLimits) {
  std::string huge = "root ::=";
  for (int i = 0; i < 105; ++i) huge += " \"a\"{10000}";
  EXPECT_NE(error_of(huge + "\n").find("expands to more than"), std::string::npos);
  EXPECT_NE(error_of(std::string(kMaxGrammarTextBytes + 1, ' ')).find("at most"),
            std::string::npos);
}

TEST(GrammarMatcher, WildlyAmbiguousGrammarIsAnErrorNotAHang) {
  GrammarMatcher m = matcher_for("root ::= a\na ::= \"x\" a \"y\" | \"x\" a \"z\" | \"\"\n");
  EXPECT_THROW(m.accept_bytes(std::string(14, 'x')), Error);
}

TEST(GrammarMatcher, TokensSpanElementsAndCharacters) {
  // "{\"" spans two literals; "\xC3" then a byte token completes "é"; "x\xE2\x82" ends inside
  // the euro sign.
  GrammarMatcher m = matcher_for("root ::= \"{\\\"\" [^\"]* \"\\\":\" \n");
  const GrammarVocabulary& v = *byte_vocabulary();
  auto id_of = [&](const std::string& piece) {
    for (TokenId t = 0; t < v.n_vocab(); ++t)
      if (v.piece(t) == piece) return t;
    return TokenId{-1};
  };
  const TokenId open = id_of("{\""), c3 = id_of("\xC3"), x_euro = id_of("x\xE2\x82");
  const TokenId byte_a9 = 1 + 0xA9, byte_ac = 1 + 0xAC, close = id_of("\":");
  EXPECT_FALSE(m.allows(close));
  EXPECT_FALSE(m.allows(0));  // end of generation: not yet
  m.accept(open);
  EXPECT_TRUE(m.allows(c3));
  m.accept(c3);
  EXPECT_FALSE(m.allows(close));  // inside a character
  EXPECT_TRUE(m.allows(byte_a9));
  m.accept(byte_a9);
  m.accept(x_euro);
  EXPECT_TRUE(m.allows(byte_a9));   // E2 82 A9 (U+20A9) completes a character...
  EXPECT_TRUE(m.allows(byte_ac));   // ...and so does E2 82 AC (U+20AC)
  EXPECT_FALSE(m.allows(1 + 'A'));  // an ASCII byte would break it
  m.accept(byte_ac);
  EXPECT_FALSE(m.can_end());
  m.accept(close);
  EXPECT_TRUE(m.is_complete());
  EXPECT_TRUE(m.allows(0));
  EXPECT_THROW(m.accept(open), Error);
}

TEST(GrammarMatcher, MaskEqualsTokenByTokenCheck) {
  GrammarMatcher m = matcher_for("root ::= (\"ab\" | [0-9] | \"é\")+ \"c\"?\n");
  for (const std::string prefix : {"", "ab", "a", "1ab", "\xC3"}) {
    GrammarMatcher copy = m;
    ASSERT_TRUE(copy.accept_bytes(prefix)) << prefix;
    const std::vector<uint64_t> mask = copy.allowed_tokens();
    for (TokenId t = 0; t < copy.n_vocab(); ++t) {
      const bool in_mask = (mask[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
      EXPECT_EQ(in_mask, copy.allows(t)) << "prefix '" << prefix << "' token " << t;
    }
  }
}

// The matcher memoizes its states, their byte transitions and their tokens_to_end: along random
// documents of a real schema, fed a few bytes at a time, every answer equals that of a matcher
// that starts from nothing at that point.
TEST(GrammarMatcher, MemoizedAnswersEqualFreshOnesAlongRandomDocuments) {
  const auto grammar = compile_json_schema(nlohmann::ordered_json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 6},
      "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
      "home": {"type": "object", "properties": {"city": {"type": "string"}}},
      "active": {"type": "boolean"}
    },
    "required": ["name", "age"]
  })"));
  testing::GrammarWalk walk(*grammar);
  std::mt19937_64 rng(17);
  for (int document = 0; document < 6; ++document) {
    const std::string text = walk.sentence(rng);
    GrammarMatcher live(grammar, byte_vocabulary(), {0});
    for (size_t at = 0; at < text.size();) {
      GrammarMatcher fresh(grammar, byte_vocabulary(), {0});
      ASSERT_TRUE(fresh.accept_bytes(text.substr(0, at)));
      expect_same_answers(live, fresh, text.substr(0, at));
      const size_t n = std::min<size_t>(1 + rng() % 3, text.size() - at);
      ASSERT_TRUE(live.accept_bytes(text.substr(at, n))) << text;
      at += n;
    }
    EXPECT_TRUE(live.can_end()) << text;
  }
}

// More states than the memo holds (4096; each of 9000 positions in the string is one): it starts
// again from the current state, twice, and the answers stay those of a fresh matcher.
TEST(GrammarMatcher, TheStateMemoStartsAgainWithoutChangingAnswers) {
  const auto grammar = compile_gbnf("root ::= [a-c]{0,9000} \".\"\n");
  GrammarMatcher live(grammar, byte_vocabulary(), {0});
  for (int n = 0; n < 9000; ++n) {
    live.allowed_tokens();  // a walk of the trie: states for the next few positions too
    if (n % 2000 == 1999 || n == 8999) {
      GrammarMatcher fresh(grammar, byte_vocabulary(), {0});
      ASSERT_TRUE(fresh.accept_bytes(std::string(static_cast<size_t>(n), 'a')));
      expect_same_answers(live, fresh, std::to_string(n) + " a");
    }
    live.accept(1 + 'a');
  }
  EXPECT_FALSE(live.allows(1 + 'a'));
  live.accept(1 + '.');
  EXPECT_TRUE(live.is_complete());
}

TEST(GrammarMatcher, TokensToEndCountTheShortestCompletionAndTheEndToken) {
  GrammarMatcher m =
      matcher_for("root ::= \"[\" item ( \",\" item )* \"]\"\nitem ::= [a-z]+ | \"()\"\n");
  // "[a]" and the end token (an upper bound: here "]" alone would end it).
  EXPECT_EQ(m.tokens_to_end(), 4);
  ASSERT_TRUE(m.accept_bytes("[abc,("));
  EXPECT_EQ(m.tokens_to_end(), 3);  // ")]"
  ASSERT_TRUE(m.accept_bytes(")]"));
  EXPECT_EQ(m.tokens_to_end(), 0);  // complete: nothing may follow
  GrammarMatcher open = matcher_for("root ::= \"a\"+\n");
  ASSERT_TRUE(open.accept_bytes("aa"));
  EXPECT_EQ(open.tokens_to_end(), 1);  // it may end, with an end token
}

// A model that always prefers to go on (token "a" at a high logit) still ends in time: the
// tokens after which the output could no longer end within the budget are refused.
TEST(GrammarSampling, TheOutputEndsWithinTheTokenBudget) {
  const GrammarVocabulary& v = *byte_vocabulary();
  SamplingParams greedy;
  greedy.temperature = 0;
  for (int max_tokens : {4, 5, 9, 30}) {
    GrammarMatcher m = matcher_for("root ::= \"[\" [a-z]* ( \",\" [a-z]+ )* \"]\"\n");
    Sampler sampler(greedy, v.n_vocab());
    std::vector<TokenId> history{0};
    std::string text;
    for (int i = 0; i < max_tokens && !m.is_complete(); ++i) {
      std::vector<float> logits(static_cast<size_t>(v.n_vocab()), 0.0f);
      logits[1 + 'a'] = 10;
      logits[1 + ','] = 5;
      const TokenId t =
          sample_constrained(sampler, m, logits.data(), v.n_vocab(), history, max_tokens - i - 1);
      history.push_back(t);
      text += v.piece(t);
    }
    EXPECT_TRUE(m.is_complete()) << max_tokens << ": " << text;
    EXPECT_EQ(text.front(), '[');
    EXPECT_EQ(text.back(), ']');
    EXPECT_GE(static_cast<int>(text.size()), max_tokens - 2) << text;  // not earlier than needed
  }
  // A budget the shortest completion does not fit: the tokens that end soonest.
  GrammarMatcher m = matcher_for("root ::= \"[\" [a-z]* \"]]\"\n");
  ASSERT_TRUE(m.accept_bytes("["));
  const std::vector<uint64_t> soonest = m.allowed_tokens_within(0);
  for (TokenId t = 0; t < m.n_vocab(); ++t) {
    const bool in = (soonest[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
    EXPECT_EQ(in, t == 1 + ']') << t;
  }
}

}  // namespace
}  // namespace k25
