// Deterministic random kernel-language programs, for the fuzz harness
// (parser and checker must never crash or hang) and for CPU-vs-GPU checks.
// Same seed, same program, on every platform (no std distributions).
#pragma once

#include <cstdint>
#include <string>

namespace kt {

struct RandomProgramOptions {
  bool row_kernels = true;     // may add max/sum reductions
  bool exact_only = false;     // only operations the GPU rounds exactly as the
                               // interpreter does (no exp/log/tanh/erf/sigmoid,
                               // no f32 sums)
};

// A well-formed, well-typed program. Its inputs all have the first output's
// shape; some reads use computed indices that can fall outside the view.
std::string random_program(uint64_t seed, const RandomProgramOptions &options);

// `source` with a few random edits (deleted, duplicated or replaced bytes
// and tokens): mostly invalid programs, for the fuzz harness.
std::string mutate_program(const std::string &source, uint64_t seed);

}  // namespace kt
