// RoPE references for the tests: the inverse frequencies and attention
// factor of Hugging Face transformers' modeling_rope_utils.py, written again
// from its source (f32 step by step, as torch rounds each op; and in f64
// throughout), and the rotation of one head in f64.
#pragma once

#include <kaio/kaio.h>

#include <vector>

namespace kt {

struct RopeRef {
  std::vector<double> inv_freq;  // rotary_dim / 2 entries
  double attention = 1.0;
};

// f32: each entry is an f32 value, attention the f32 the kernels scale by.
RopeRef rope_ref_f32(const kaio_rope_desc &desc);
// f64: the same formulas with no f32 rounding anywhere.
RopeRef rope_ref_f64(const kaio_rope_desc &desc);

// Head x (head_dim values) rotated at angles[i] (one per pair), in f64:
// returns the new head; dims from rotary_dim on are copied.
std::vector<double> rope_rotate_ref(const kaio_rope_desc &desc, const double *x,
                                    const std::vector<double> &angles, double attention);

}  // namespace kt
