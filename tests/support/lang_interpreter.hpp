// The reference for kernel-language kernels: a CPU interpreter of the
// checked tree with the GPU's semantics (f32 arithmetic rounded as the PTX
// .rn instructions round, saturating float-to-int casts, defined integer
// division by zero, clamped shift amounts, round-to-nearest-even stores,
// skipped out-of-range reads). exp/log/tanh/erf/sigmoid are computed in f64,
// so those agree with the GPU only within their stated error bounds, and
// sums are accumulated in column order, which the GPU's tree does not
// follow: tests compare those with tolerances, everything else bit-exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "lang/ast.hpp"

namespace kt {

struct LangView {
  kaio::lang::DType dtype = kaio::lang::DType::f32;
  int64_t rows = 0, cols = 0, stride = 0;  // stride in elements
  std::vector<uint8_t> bytes;              // element (r, c) at (r*stride + c)*esize
};

struct LangRun {
  int first_bad_site = -1;  // lowest access site that read out of range, or -1
};

// Runs the kernel over every element of its first output, writing the
// outputs into `tensors` (one per tensor parameter, in order).
LangRun interpret(const kaio::lang::Kernel &k, std::vector<LangView> &tensors,
                  const std::vector<double> &scalars);

// One element of a view as f64 (its exact stored value).
double view_value(const LangView &v, int64_t r, int64_t c);

}  // namespace kt
