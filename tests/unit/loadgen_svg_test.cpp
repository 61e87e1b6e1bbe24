// k25-bench's SVG writer: the output is well-formed XML (checked by a small tag-balance parser),
// text is escaped, empty and degenerate charts still render, ticks are round numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "loadgen/svg_plot.h"

namespace k25::loadgen {
namespace {

// Checks XML well-formedness as far as SVG output needs: every element closed in order, attribute
// values quoted, no raw '<' or stray '&' in text. Returns "" or the first problem.
std::string xml_problem(const std::string& xml) {
  std::vector<std::string> open;
  size_t i = 0;
  if (xml.rfind("<?xml", 0) == 0) i = xml.find("?>") + 2;
  auto check_entities = [&](size_t from, size_t to) -> std::string {
    for (size_t k = from; k < to; ++k) {
      if (xml[k] != '&') continue;
      const size_t semi = xml.find(';', k);
      if (semi == std::string::npos || semi > to) return "stray & at " + std::to_string(k);
      const std::string entity = xml.substr(k, semi - k + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" &&
          entity != "&apos;") {
        return "unknown entity " + entity;
      }
    }
    return "";
  };
  while (i < xml.size()) {
    const size_t lt = xml.find('<', i);
    if (lt == std::string::npos) {
      if (auto p = check_entities(i, xml.size()); !p.empty()) return p;
      break;
    }
    if (auto p = check_entities(i, lt); !p.empty()) return p;
    if (!open.empty() || lt > i) {
      for (size_t k = i; k < lt; ++k) {
        if (xml[k] == '>') return "raw > in text at " + std::to_string(k);
      }
    }
    // Find the end of the tag, skipping quoted attribute values.
    size_t k = lt + 1;
    char quote = 0;
    for (; k < xml.size(); ++k) {
      if (quote) {
        if (xml[k] == quote) quote = 0;
        if (xml[k] == '<') return "raw < in an attribute at " + std::to_string(k);
      } else if (xml[k] == '"' || xml[k] == '\'') {
        quote = xml[k];
      } else if (xml[k] == '>') {
        break;
      }
    }
    if (k >= xml.size()) return "unterminated tag at " + std::to_string(lt);
    std::string tag = xml.substr(lt + 1, k - lt - 1);
    if (auto p = check_entities(lt, k); !p.empty()) return p;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '/') {
      std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "unexpected </" + name + ">";
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n\t")));
    } else if (open.empty()) {
      return "self-closed element outside the root";
    }
    i = k + 1;
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  return "";
}

TEST(LoadgenSvg, CheckerCatchesBrokenXml) {
  EXPECT_EQ(xml_problem("<svg><g></g></svg>"), "");
  EXPECT_NE(xml_problem("<svg><g></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a < b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>a & b</text></svg>"), "");
  EXPECT_NE(xml_problem("<svg><text>x</text>"), "");
}

TEST(LoadgenSvg, ChartsAreWellFormed) {
  Chart cdf{"TTFT <CDF> & \"friends\"", "ms", "fraction", {}};
  cdf.series.push_back({"gold & co", cdf_points({5, 1, 3, 2, 4})});
  cdf.series.push_back({"empty", {}});
  Chart dots{"e2e", "s", "ms", {}};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  dots.series.push_back({"silver", {{0, 10}, {1, 20}, {nan, 3}, {2, 1e9}}, true});
  Chart nothing{"no data", "x", "y", {}};
  const std::string svg = render_svg({cdf, dots, nothing});
  EXPECT_EQ(xml_problem(svg), "") << svg;
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("TTFT &lt;CDF&gt; &amp; &quot;friends&quot;"), std::string::npos);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
}

TEST(LoadgenSvg, EscapeDropsControlCharacters) {
  EXPECT_EQ(xml_escape(std::string("a\x01"
                                   "b<\n")),
            "ab&lt;\n");
}

TEST(LoadgenSvg, CdfPoints) {
  auto p = cdf_points({3, 1, 2});
  ASSERT_EQ(p.size(), 6u);
  EXPECT_DOUBLE_EQ(p.front().first, 1);
  EXPECT_DOUBLE_EQ(p.front().second, 0);
  EXPECT_DOUBLE_EQ(p.back().first, 3);
  EXPECT_DOUBLE_EQ(p.back().second, 1);
}

TEST(LoadgenSvg, NiceTicks) {
  auto t = nice_ticks(0, 97);
  ASSERT_FALSE(t.empty());
  EXPECT_DOUBLE_EQ(t.front(), 0);
  EXPECT_GE(t.back(), 97);
  const double step = t[1] - t[0];
  EXPECT_DOUBLE_EQ(step, 20);
  auto small = nice_ticks(0, 0.003);
  EXPECT_NEAR(small[1] - small[0], 0.0005, 1e-12);
  EXPECT_FALSE(nice_ticks(5, 5).empty());
}

}  // namespace
}  // namespace k25::loadgen
