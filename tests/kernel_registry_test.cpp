// The generated kernel registry (src/kernels/kernel_registry.py) against the
// embedded modules: every KernelId names an entry of its module, with the
// block and shared memory its PTX declares, every module is in the registry,
// and the selectors pick the kernels their keys name.
//   usage: kernel_registry_test
#include <cstdio>
#include <cstring>
#include <string>

#include "kernels/builtin_kernels.hpp"
#include "kernels/embedded_ptx.hpp"
#include "kernels/ptx_entry.hpp"

namespace {

using namespace kaio;
using kernels::Pass;
using kernels::Tile;
using kernels::Variant;

// Selectors are constexpr: their keys are checked at compile time here.
static_assert(kernels::matmul_sm80(Variant::async, KAIO_DTYPE_BF16, true, false) ==
              KernelId::matmul_sm80_async_bf16_tn);
static_assert(kernels::matmul_sm90(KAIO_DTYPE_F16, false, true, Tile::n128) ==
              KernelId::matmul_sm90_f16_nt_n128);
static_assert(kernels::matmul_sm90(KAIO_DTYPE_I8, false, true, Tile::n256) ==
              KernelId::matmul_sm90_s8_nt);
static_assert(kernels::matmul_sm90(KAIO_DTYPE_I8, true, true, Tile::n256) == KernelId::count,
              "no s8 kernel takes a transposed A");
static_assert(kernels::attn_bwd_sm80(Pass::bwd_dkdv, KAIO_DTYPE_F16, 96) ==
              KernelId::attn_bwd_dkdv_f16_d96);
static_assert(kernels::attn_bwd_sm80(Pass::bwd_dq, KAIO_DTYPE_F16, 256) == KernelId::count,
              "the sm_80 backward takes head dims up to 128");
static_assert(kernels::kq_stream(KAIO_QUANT_Q5_K, KAIO_DTYPE_F32) == KernelId::kq_stream_q5_k_f32);
static_assert(kernels::kq_quantize(KAIO_QUANT_Q6_K, KAIO_QUANT_MODE_CANDLE) ==
              KernelId::kq_quantize_q6_k_candle);
static_assert(kernels::splitk_reduce() == KernelId::splitk_reduce);
// The streaming k-quant matvec waits for the previous grid (programmatic
// dependent launch); the register-fed one does not.
static_assert(kernel_info(KernelId::kq_stream_q4_k_f16).grid_dep_wait &&
              !kernel_info(KernelId::kq_mma_q4_k_f16).grid_dep_wait);
// GEMM tiles come from the generators (manifest.facts(tile=...)).
static_assert(kernel_info(KernelId::matmul_sm90_bf16_tn).tile_n == 256 &&
              kernel_info(KernelId::matmul_sm90_bf16_tn_n128).tile_n == 128 &&
              kernel_info(KernelId::matmul_sm90_s8_nt).tile_k == 128 &&
              kernel_info(KernelId::matmul_sm80_async_f16_nt).tile_m == 128);

// The first number after `directive` in entry's PTX, or -1.
long directive_value(const std::string &ptx, const char *directive) {
  const size_t at = ptx.find(directive);
  return at == std::string::npos ? -1 : std::strtol(ptx.c_str() + at + std::strlen(directive), nullptr, 10);
}

}  // namespace

int main() {
  int failures = 0;
  auto check = [&](bool ok, const char *what, const char *name) {
    if (!ok) {
      std::fprintf(stderr, "FAIL: %s: %s\n", name, what);
      ++failures;
    }
  };
  // (Not static_asserts: GCC's UBSan makes pointer comparisons non-constant.)
  const KernelInfo &sm90 = kernel_info(KernelId::matmul_sm90_f16_nn);
  check(sm90.tma_box("tmap_b") != nullptr && sm90.tma_box("tmap_b")[1] > 0, "no tmap_b box",
        sm90.name);
  check(sm90.tma_box("tmap_q") == nullptr, "a box for a parameter it does not have", sm90.name);
  const int count = static_cast<int>(KernelId::count);
  bool module_used[static_cast<int>(ModuleId::count)] = {};
  for (int i = 0; i < count; ++i) {
    const KernelInfo &k = kernel_info(static_cast<KernelId>(i));
    module_used[static_cast<int>(k.module)] = true;
    const char *ptx = embedded_ptx(module_name(k.module));
    check(ptx != nullptr, "its module is not embedded", k.name);
    if (!ptx) continue;
    const std::string single = ptx_single_entry(ptx, k.name);
    check(!single.empty(), "not an entry of its module", k.name);
    const long maxntid = directive_value(single, ".maxntid ");
    const long reqntid = directive_value(single, ".reqntid ");
    check((maxntid < 0 ? reqntid : maxntid) == static_cast<long>(k.block[0]),
          "block is not the entry's .maxntid/.reqntid", k.name);
    check(k.block[0] > 0 && k.block[0] <= 1024, "block out of range", k.name);
    check(k.dynamic_shared_bytes <= 227 * 1024, "more dynamic shared memory than any GPU has",
          k.name);
    // Launched with programmatic stream serialization exactly when it waits
    // for the previous grid (ops/launch.cpp).
    check(k.grid_dep_wait == (single.find("griddepcontrol.wait") != std::string::npos),
          "grid_dep_wait is not whether its PTX executes griddepcontrol.wait", k.name);
  }
  for (size_t m = 0; m < kEmbeddedModuleCount; ++m) {
    bool found = false;
    for (int i = 0; i < static_cast<int>(ModuleId::count); ++i)
      if (std::strcmp(module_name(static_cast<ModuleId>(i)), kEmbeddedModules[m].name) == 0)
        found = module_used[i];
    check(found, "an embedded module with no kernel in the registry", kEmbeddedModules[m].name);
  }
  std::printf("kernel_registry_test: %d kernels, %zu modules, %d failures\n", count,
              kEmbeddedModuleCount, failures);
  return failures ? 1 : 0;
}
