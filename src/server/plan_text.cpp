#include "server/plan_text.h"

#include <charconv>
#include <string>

#include "core/error.h"

namespace k25 {

namespace {

int number(std::string_view text, std::string_view plan) {
  int n = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 0) {
    fail("plan '", plan, "': '", text, "' is not a layer or head number");
  }
  return n;
}

// Splits `text` at `separator` and hands each non-empty piece to `each`.
template <typename Each>
void split(std::string_view text, char separator, Each each) {
  while (!text.empty()) {
    const size_t end = std::min(text.find(separator), text.size());
    if (end > 0) each(text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
}

}  // namespace

PlanSkips parse_plan_text(std::string_view text) {
  PlanSkips out;
  // Only masked heads inside skipped blocks: nothing the forward pass skips beyond them.
  if (text == "full" || text == "heads-off-in-skipped-blocks") return out;
  while (!text.empty()) {
    const size_t open = text.find('[');
    const size_t close = text.find(']');
    if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
      fail("plan '", text, "': expected name[...]");
    }
    const std::string_view name = text.substr(0, open);
    const std::string_view list = text.substr(open + 1, close - open - 1);
    if (name == "attn-off" || name == "ffn-off") {
      std::vector<int>& layers = name == "attn-off" ? out.attention_off : out.ffn_off;
      split(list, ',', [&](std::string_view n) { layers.push_back(number(n, text)); });
    } else if (name == "heads-off") {
      split(list, ' ', [&](std::string_view layer_heads) {
        const size_t colon = layer_heads.find(':');
        if (colon == std::string_view::npos) fail("plan '", text, "': expected layer:heads");
        const int layer = number(layer_heads.substr(0, colon), text);
        split(layer_heads.substr(colon + 1), ',',
              [&](std::string_view h) { out.heads_off.emplace_back(layer, number(h, text)); });
      });
    } else {
      fail("plan '", text, "': unknown part '", name, "'");
    }
    text.remove_prefix(close + 1);
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  }
  return out;
}

}  // namespace k25
