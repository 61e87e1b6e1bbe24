// GBNF syntax tree (gbnf_parser.h) to the byte-level Grammar (grammar.h), with the checks that
// keep the matcher's work bounded: no undefined or duplicate rules, no left recursion (the
// matcher expands rules before consuming input, so a rule that can reach itself without
// consuming would expand forever), no rule that can never finish, size limits.
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "model/gbnf_parser.h"
#include "model/grammar.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8_ranges.h"

namespace k25 {

namespace {

using Sequence = std::vector<GrammarElement>;

struct RuleDraft {
  std::string name;
  std::string origin;  // the GBNF rule it belongs to (itself for a named rule)
  int line = 0, column = 0;
  std::vector<Sequence> alternatives;
};

class Compiler {
 public:
  explicit Compiler(const std::vector<GbnfRule>& rules) : ast_(rules) {}

  std::shared_ptr<const Grammar> compile() {
    for (const GbnfRule& rule : ast_) {
      auto [it, added] = index_.emplace(rule.name, static_cast<uint32_t>(drafts_.size()));
      if (!added) {
        const RuleDraft& first = drafts_[it->second];
        fail("grammar: line ", rule.line, ", column ", rule.column, ": rule '", rule.name,
             "' is defined twice (first at line ", first.line, ")");
      }
      drafts_.push_back({rule.name, rule.name, rule.line, rule.column, {}});
    }
    const auto root = index_.find("root");
    if (root == index_.end()) fail("grammar: no 'root' rule (the start of the grammar)");
    for (size_t i = 0; i < ast_.size(); ++i) {
      for (const GbnfSequence& alternative : ast_[i].alternatives) {
        Sequence out;
        lower_sequence(alternative, static_cast<uint32_t>(i), out);
        drafts_[i].alternatives.push_back(std::move(out));
      }
    }
    check(root->second);
    return flatten(root->second);
  }

 private:
  const std::vector<GbnfRule>& ast_;
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<RuleDraft> drafts_;
  std::vector<ByteSet> byte_sets_;
  std::map<std::array<uint64_t, 4>, uint32_t> byte_set_index_;
  std::map<std::vector<std::pair<char32_t, char32_t>>, uint32_t> class_rules_;
  size_t n_elements_ = 0;

  void count(size_t n, const GbnfItem& where) {
    n_elements_ += n;
    if (n_elements_ > kMaxGrammarElements) {
      fail("grammar: line ", where.line, ", column ", where.column,
           ": the grammar expands to more ", "than ", kMaxGrammarElements,
           " elements (repetitions count once per copy)");
    }
  }

  GrammarElement bytes(const ByteSet& set) {
    auto [it, added] = byte_set_index_.emplace(set.bits, static_cast<uint32_t>(byte_sets_.size()));
    if (added) byte_sets_.push_back(set);
    return {GrammarElement::Kind::Bytes, it->second};
  }

  GrammarElement new_rule(uint32_t origin, const GbnfItem& where,
                          std::vector<Sequence> alternatives) {
    const auto id = static_cast<uint32_t>(drafts_.size());
    const std::string& origin_name = drafts_[origin].origin;
    drafts_.push_back({concat(origin_name, "~", id), origin_name, where.line, where.column,
                       std::move(alternatives)});
    return {GrammarElement::Kind::Rule, id};
  }

  void lower_sequence(const GbnfSequence& sequence, uint32_t origin, Sequence& out) {
    for (const GbnfItem& item : sequence) {
      if (item.min == 1 && item.max == 1) {
        emit_once(item, origin, out);
        continue;
      }
      const GrammarElement one = single_element(item, origin);
      count(static_cast<size_t>(item.min), item);
      out.insert(out.end(), static_cast<size_t>(item.min), one);
      if (item.max < 0) {
        // star ::= one star | ""  (right recursion: the matcher runs it in constant stack)
        const auto star = static_cast<uint32_t>(drafts_.size());
        new_rule(origin, item, {});
        drafts_[star].alternatives = {{one, {GrammarElement::Kind::Rule, star}}, {}};
        count(3, item);
        out.push_back({GrammarElement::Kind::Rule, star});
      } else if (item.max > item.min) {
        // opt_k ::= one opt_(k-1) | ""  for the (max - min) optional copies.
        GrammarElement tail = new_rule(origin, item, {{one}, {}});
        for (int k = 1; k < item.max - item.min; ++k) {
          tail = new_rule(origin, item, {{one, tail}, {}});
          count(3, item);
        }
        out.push_back(tail);
      }
    }
  }

  GrammarElement single_element(const GbnfItem& item, uint32_t origin) {
    Sequence once;
    emit_once(item, origin, once);
    if (once.size() == 1) return once[0];
    return new_rule(origin, item, {std::move(once)});
  }

  void emit_once(const GbnfItem& item, uint32_t origin, Sequence& out) {
    switch (item.kind) {
      case GbnfItem::Kind::Literal: {
        std::string utf8;
        for (char32_t c : item.literal) unicode::append_utf8(utf8, c);
        count(utf8.size(), item);
        for (char c : utf8) {
          ByteSet set;
          set.add(static_cast<uint8_t>(c));
          out.push_back(bytes(set));
        }
        return;
      }
      case GbnfItem::Kind::CharClass:
        count(1, item);
        out.push_back(char_class(item, origin));
        return;
      case GbnfItem::Kind::RuleRef: {
        const auto it = index_.find(item.name);
        if (it == index_.end()) {
          fail("grammar: line ", item.line, ", column ", item.column, ": rule '", item.name,
               "' is used but not defined");
        }
        count(1, item);
        out.push_back({GrammarElement::Kind::Rule, it->second});
        return;
      }
      case GbnfItem::Kind::Group: {
        if (item.group.size() == 1) {
          lower_sequence(item.group[0], origin, out);
          return;
        }
        std::vector<Sequence> alternatives;
        for (const GbnfSequence& alternative : item.group) {
          Sequence lowered;
          lower_sequence(alternative, origin, lowered);
          alternatives.push_back(std::move(lowered));
        }
        count(1, item);
        out.push_back(new_rule(origin, item, std::move(alternatives)));
        return;
      }
    }
  }

  // One byte set when every character is ASCII, else a rule with one alternative per UTF-8
  // pattern (shared by every use of the same class).
  GrammarElement char_class(const GbnfItem& item, uint32_t origin) {
    auto ranges = normalize_code_point_ranges(item.ranges, item.negated);
    if (ranges.empty()) {
      fail("grammar: line ", item.line, ", column ", item.column,
           ": character class matches no character");
    }
    if (auto it = class_rules_.find(ranges); it != class_rules_.end())
      return {GrammarElement::Kind::Rule, it->second};
    std::vector<Utf8Pattern> patterns;
    for (const auto& [lo, hi] : ranges) utf8_patterns(lo, hi, patterns);
    ByteSet single;
    bool has_single = false;
    std::vector<Sequence> alternatives;
    for (const Utf8Pattern& pattern : patterns) {
      if (pattern.size() == 1) {
        single.add_range(pattern[0].lo, pattern[0].hi);
        has_single = true;
        continue;
      }
      Sequence sequence;
      for (const ByteRange& r : pattern) {
        ByteSet set;
        set.add_range(r.lo, r.hi);
        sequence.push_back(bytes(set));
      }
      count(sequence.size() + 1, item);
      alternatives.push_back(std::move(sequence));
    }
    if (alternatives.empty()) return bytes(single);
    if (has_single) alternatives.insert(alternatives.begin(), Sequence{bytes(single)});
    const GrammarElement rule = new_rule(origin, item, std::move(alternatives));
    class_rules_.emplace(std::move(ranges), rule.index);
    return rule;
  }

  // Reachability from the root, then nullability, productivity and left recursion over the
  // reachable rules.
  void check(uint32_t root) {
    const size_t n = drafts_.size();
    std::vector<char> reachable(n, 0);
    std::vector<uint32_t> work{root};
    reachable[root] = 1;
    while (!work.empty()) {
      const uint32_t r = work.back();
      work.pop_back();
      for (const Sequence& alternative : drafts_[r].alternatives)
        for (const GrammarElement& e : alternative)
          if (e.kind == GrammarElement::Kind::Rule && !reachable[e.index]) {
            reachable[e.index] = 1;
            work.push_back(e.index);
          }
    }

    // nullable: derives the empty string; productive: derives some string.
    std::vector<char> nullable(n, 0), productive(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        for (const Sequence& alternative : drafts_[r].alternatives) {
          bool all_nullable = true, all_productive = true;
          for (const GrammarElement& e : alternative) {
            const bool is_rule = e.kind == GrammarElement::Kind::Rule;
            all_nullable = all_nullable && is_rule && nullable[e.index];
            all_productive = all_productive && (!is_rule || productive[e.index]);
          }
          if (all_nullable && !nullable[r]) nullable[r] = 1, changed = true;
          if (all_productive && !productive[r]) productive[r] = 1, changed = true;
        }
      }
    }
    for (size_t r = 0; r < n; ++r) {
      if (reachable[r] && !productive[r]) {
        const RuleDraft& d = drafts_[r];
        fail("grammar: line ", d.line, ", column ", d.column, ": rule '", d.origin,
             "' can never finish: every alternative needs an unfinished rule again");
      }
    }

    // Left recursion: a cycle in "r may start with s" (after nullable elements only).
    std::vector<std::vector<uint32_t>> starts(n);
    for (size_t r = 0; r < n; ++r) {
      if (!reachable[r]) continue;
      for (const Sequence& alternative : drafts_[r].alternatives)
        for (const GrammarElement& e : alternative) {
          if (e.kind != GrammarElement::Kind::Rule) break;
          starts[r].push_back(e.index);
          if (!nullable[e.index]) break;
        }
    }
    std::vector<char> color(n, 0);  // 0 unvisited, 1 on the path, 2 done
    std::vector<uint32_t> path;
    for (size_t r = 0; r < n; ++r)
      if (reachable[r] && color[r] == 0)
        find_left_cycle(static_cast<uint32_t>(r), starts, color, path);
  }

  void find_left_cycle(uint32_t r, const std::vector<std::vector<uint32_t>>& starts,
                       std::vector<char>& color, std::vector<uint32_t>& path) {
    // Iterative depth-first search: generated chains can be long.
    std::vector<std::pair<uint32_t, size_t>> stack{{r, 0}};
    color[r] = 1;
    path.push_back(r);
    while (!stack.empty()) {
      auto& [rule, next] = stack.back();
      if (next == starts[rule].size()) {
        color[rule] = 2;
        path.pop_back();
        stack.pop_back();
        continue;
      }
      const uint32_t s = starts[rule][next++];
      if (color[s] == 1) report_left_recursion(s, path);
      if (color[s] == 0) {
        color[s] = 1;
        path.push_back(s);
        stack.push_back({s, 0});
      }
    }
  }

  [[noreturn]] void report_left_recursion(uint32_t again, const std::vector<uint32_t>& path) {
    size_t begin = 0;
    while (path[begin] != again) ++begin;
    std::string cycle;
    std::string last;
    for (size_t i = begin; i < path.size(); ++i) {
      const std::string& name = drafts_[path[i]].origin;
      if (name == last) continue;
      cycle += name + " -> ";
      last = name;
    }
    cycle += drafts_[again].origin;
    const RuleDraft& d = drafts_[again];
    fail("grammar: line ", d.line, ", column ", d.column, ": left recursion (", cycle,
         "): a rule must not reach itself before matching a character; write the repetition "
         "with '*' or '+'");
  }

  std::shared_ptr<const Grammar> flatten(uint32_t root) {
    auto grammar = std::make_shared<Grammar>();
    grammar->root = root;
    grammar->byte_sets = std::move(byte_sets_);
    grammar->elements.reserve(n_elements_ + drafts_.size() * 2);
    for (RuleDraft& d : drafts_) {
      Grammar::Rule rule;
      rule.name = std::move(d.name);
      for (const Sequence& alternative : d.alternatives) {
        rule.alternatives.push_back(static_cast<uint32_t>(grammar->elements.size()));
        grammar->elements.insert(grammar->elements.end(), alternative.begin(), alternative.end());
        grammar->elements.push_back({GrammarElement::Kind::End, 0});
      }
      grammar->rules.push_back(std::move(rule));
    }
    return grammar;
  }
};

}  // namespace

std::shared_ptr<const Grammar> compile_gbnf(std::string_view text) {
  const std::vector<GbnfRule> rules = parse_gbnf(text);
  return Compiler(rules).compile();
}

}  // namespace k25
