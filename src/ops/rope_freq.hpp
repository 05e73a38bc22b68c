// RoPE's inverse frequencies and attention factor as Hugging Face
// transformers computes them (modeling_rope_utils.py), in f32 step by step.
#pragma once

#include <kaio/kaio.h>

namespace kaio {

// The kernels take at most this many pairs per head (rotary_dim <= 512).
constexpr int kRopeMaxHalf = 256;

struct RopeFreqs {
  int half = 0;                     // rotary_dim / 2
  float inv_freq[kRopeMaxHalf] = {};
  float attention = 1.0f;           // cos and sin are scaled by it (YaRN)
};

// Fills out from a desc whose fields are already checked (rope.cpp).
void rope_frequencies(const kaio_rope_desc &desc, int64_t rotary_dim, RopeFreqs *out);

}  // namespace kaio
