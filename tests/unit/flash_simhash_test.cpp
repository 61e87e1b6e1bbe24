// R-FP2/R-FP4: SimHash signatures, domain matching and the request fingerprint.
#include <gtest/gtest.h>

#include "flash/fingerprint.h"
#include "flash/simhash.h"

namespace k25 {
namespace {

const char* kLegal =
    "According to Article 47 of the Labour Contract Law, economic compensation shall be paid "
    "to the worker at the rate of one month's wage for each full year of service. A period of "
    "more than six months but less than one year counts as one year.";
const char* kLegalEdited =
    "According to Article 47 of the Labour Contract Law, economic compensation shall be paid "
    "to the employee at the rate of one month's wage for each full year of work. A period of "
    "more than six months but less than one year counts as one year.";
const char* kStory =
    "Once upon a time there was a little girl named Lily. She loved to play in the park with "
    "her dog Max. One sunny day they found a big red ball under a tree and played all day.";

TEST(SimHash, SimilarTextsAreCloseDifferentTextsAreFar) {
  const int near = hamming_distance(simhash64(kLegal), simhash64(kLegalEdited));
  const int far = hamming_distance(simhash64(kLegal), simhash64(kStory));
  EXPECT_LE(near, 12);
  EXPECT_GE(far, 20);
  EXPECT_LT(near, far);
}

TEST(SimHash, IdenticalTextSameSignatureAndCaseAndWhitespaceFolded) {
  EXPECT_EQ(simhash64(kStory), simhash64(kStory));
  EXPECT_EQ(simhash64("Hello   World\n"), simhash64("hello world "));
}

TEST(SimHash, OnlyTheFirst256CodePointsCount) {
  const std::string prefix(256, 'a');
  EXPECT_EQ(simhash64(prefix + "completely different tail"), simhash64(prefix + "zzzz"));
  // Code points, not bytes: 256 two-byte characters are all read.
  std::string accents;
  for (int i = 0; i < 256; ++i) accents += (i % 2) ? "\xC3\xA9" : "\xC3\xA8";  // é, è
  EXPECT_EQ(simhash64(accents + "x"), simhash64(accents + "y"));
  EXPECT_NE(simhash64(accents.substr(0, 200) + "xyz"), simhash64(accents.substr(0, 200) + "qrs"));
}

TEST(SimHash, UnicodeTextsAreHashedByCodePoint) {
  const std::string zh1 = "根据劳动合同法第四十七条，经济补偿按劳动者在本单位工作的年限支付。";
  const std::string zh2 = "根据劳动合同法第四十七条，经济补偿按员工在本单位工作的年限支付。";
  const std::string ja = "昔々、ある村に小さな女の子が住んでいました。毎日森で遊びました。";
  EXPECT_LT(hamming_distance(simhash64(zh1), simhash64(zh2)),
            hamming_distance(simhash64(zh1), simhash64(ja)));
  // Invalid UTF-8 never crashes and still hashes deterministically.
  const std::string bad = "abc\xFF\xFE\xC3(\xE2\x82xyz\xF0\x9F";
  EXPECT_EQ(simhash64(bad), simhash64(bad));
  EXPECT_EQ(simhash64(""), 0u);
  EXPECT_NE(simhash64("a"), 0u);
}

TEST(DomainMatcher, NearestSignatureWithinDistance) {
  DomainMatcher m(10);
  m.add("legal", simhash64(kLegal));
  m.add("stories", simhash64(kStory));
  auto hit = m.match(simhash64(kLegalEdited));
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->first, "legal");
  EXPECT_FALSE(m.match(~simhash64(kStory)).has_value());
  EXPECT_FALSE(DomainMatcher(10).match(1).has_value());
}

TEST(Fingerprint, HeaderWinsThenSimHashThenDefault) {
  DomainMatcher m(10);
  m.add("legal", simhash64(kLegal));
  FingerprintInput in;
  in.prompt_text = kLegalEdited;
  in.prompt_tokens = 60;
  in.max_tokens = 200;
  in.response_length_hint = 100;
  in.priority = 100;
  Fingerprint fp = fingerprint_request(in, &m);
  EXPECT_EQ(fp.domain, "legal");
  EXPECT_EQ(fp.source, DomainSource::SimHash);
  EXPECT_GE(fp.simhash_distance, 0);
  EXPECT_EQ(fp.prompt_tokens, 60);
  EXPECT_EQ(fp.response_tokens, 100);
  EXPECT_EQ(fp.priority, 100);
  EXPECT_FLOAT_EQ(fp.features[2], 1.0f);
  EXPECT_FLOAT_EQ(fp.features[3], 1.0f);  // short request

  in.domain_hint = "finance";
  in.domain_given = true;
  fp = fingerprint_request(in, &m);
  EXPECT_EQ(fp.domain, "finance");
  EXPECT_EQ(fp.source, DomainSource::Header);

  in.domain_given = false;
  in.prompt_text = kStory;
  in.response_length_hint = 500;  // capped by max_tokens
  fp = fingerprint_request(in, &m);
  EXPECT_EQ(fp.domain, "default");
  EXPECT_EQ(fp.source, DomainSource::Default);
  EXPECT_EQ(fp.response_tokens, 200);
  EXPECT_FLOAT_EQ(fp.features[3], 0.0f);
  EXPECT_EQ(fingerprint_request(in, nullptr).domain, "default");
}

TEST(Fingerprint, FeaturesDescribeTheCharacterMix) {
  GateFeatures f = gate_features("ab 12", 5, 5, 50);
  EXPECT_FLOAT_EQ(f[4], 0.4f);
  EXPECT_FLOAT_EQ(f[5], 0.4f);
  EXPECT_FLOAT_EQ(f[6], 0.2f);
  EXPECT_FLOAT_EQ(f[7], 0.0f);
  f = gate_features("\xC3\xA9\xC3\xA9", 1, 1, 10);
  EXPECT_FLOAT_EQ(f[7], 1.0f);
}

}  // namespace
}  // namespace k25
