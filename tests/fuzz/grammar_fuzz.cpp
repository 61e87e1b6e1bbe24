// GBNF grammars (model/grammar.h): any text either compiles into a grammar whose every reference
// is in range, or is a k25::Error; nothing else may escape, crash or hang. A compiled grammar is
// then run over the input's bytes, which must end in an answer or a k25::Error too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "model/grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto g = k25::compile_gbnf(text);
    if (g->root >= g->rules.size()) __builtin_trap();
    for (const k25::GrammarElement& e : g->elements) {
      if (e.kind == k25::GrammarElement::Kind::Rule && e.index >= g->rules.size()) __builtin_trap();
      if (e.kind == k25::GrammarElement::Kind::Bytes && e.index >= g->byte_sets.size())
        __builtin_trap();
    }
    for (const k25::Grammar::Rule& r : g->rules)
      for (uint32_t start : r.alternatives)
        if (start >= g->elements.size()) __builtin_trap();
    if (g->elements.empty() || g->elements.back().kind != k25::GrammarElement::Kind::End)
      __builtin_trap();
  } catch (const k25::Error&) {
  }
  return 0;
}
