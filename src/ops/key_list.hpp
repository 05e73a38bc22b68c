// A selector's list of values for a numeric key (kernels::keys::...): is a
// value in it, and the list as text for messages ("32, 64, 96 or 128").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kaio {

template <size_t N>
constexpr bool in_list(const int64_t (&values)[N], int64_t v) {
  for (int64_t x : values)
    if (x == v) return true;
  return false;
}

template <size_t N>
constexpr int64_t last_of(const int64_t (&values)[N]) {
  return values[N - 1];
}

// The first value >= v (the lists are sorted), or the last.
template <size_t N>
constexpr int64_t bucket_of(const int64_t (&values)[N], int64_t v) {
  for (int64_t x : values)
    if (v <= x) return x;
  return values[N - 1];
}

template <size_t N, size_t M>
constexpr bool same_list(const int64_t (&a)[N], const int64_t (&b)[M]) {
  if (N != M) return false;
  for (size_t i = 0; i < N; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// "a, b, c <last> d".
template <size_t N>
std::string list_text(const int64_t (&values)[N], const char *last) {
  std::string s;
  for (size_t i = 0; i < N; ++i) {
    if (i) s += i + 1 == N ? std::string(" ") + last + " " : ", ";
    s += std::to_string(values[i]);
  }
  return s;
}

}  // namespace kaio
