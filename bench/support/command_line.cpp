#include "command_line.hpp"

#include <charconv>

namespace kaio_bench {

std::optional<int64_t> parse_positive(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) return std::nullopt;
  return value;
}

}  // namespace kaio_bench
