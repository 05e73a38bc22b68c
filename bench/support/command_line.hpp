// Pieces of the benches' command-line parsing.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace kaio_bench {

// The whole of `text` as an integer >= 1, or nothing: "12x", "" and "0" are
// usage errors, not 12 or 0.
std::optional<int64_t> parse_positive(std::string_view text);

// `text` cut at every `sep` ("a,,b" gives "a", "", "b"; "" gives one empty part).
std::vector<std::string_view> split(std::string_view text, char sep);

}  // namespace kaio_bench
