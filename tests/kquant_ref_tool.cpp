// The k-quant test inputs and the C++ reference (tests/support/kquant_*) as
// a command, for tests/kquant_quantize_emulated.py:
//
//   kquant_ref_tool inputs DIST RANGE N SEED OUT    N f32 values of the
//       distribution (kqref::make_inputs; RANGE f32 or f16) to OUT; DIST
//       edge_blocks: kqref::edge_blocks, repeated
//   kquant_ref_tool quantize FORMAT MODE IN OUT     the reference's bytes of
//       the f32 values in IN (FORMAT q8_0, q4_k, q5_k, q6_k; MODE ggml, candle)
//   kquant_ref_tool dists                           the distributions' names
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "support/kquant_inputs.hpp"
#include "support/kquant_ref.hpp"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: kquant_ref_tool inputs DIST f32|f16 N SEED OUT\n"
               "       kquant_ref_tool quantize q8_0|q4_k|q5_k|q6_k ggml|candle IN OUT\n"
               "       kquant_ref_tool dists\n");
  return 2;
}

bool write_file(const char *path, const void *data, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char *>(data), static_cast<std::streamsize>(bytes));
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  const std::string cmd = argv[1];
  if (cmd == "dists" && argc == 2) {
    for (int d = 0; d < static_cast<int>(kqref::Dist::count); ++d)
      std::printf("%s\n", kqref::dist_name(static_cast<kqref::Dist>(d)));
    std::printf("edge_blocks\n");
    return 0;
  }
  if (cmd == "inputs" && argc == 7) {
    int dist = -1;
    for (int d = 0; d < static_cast<int>(kqref::Dist::count); ++d)
      if (std::string(kqref::dist_name(static_cast<kqref::Dist>(d))) == argv[2]) dist = d;
    const std::string range = argv[3];
    const kqref::Range r = range == "f16" ? kqref::Range::f16 : kqref::Range::f32;
    if (std::string(argv[2]) == "edge_blocks" && (range == "f32" || range == "f16")) {
      // the named edge superblocks, over and over
      const std::vector<kqref::EdgeBlock> edges = kqref::edge_blocks(r);
      std::vector<float> x(static_cast<size_t>(std::atoll(argv[4])));
      for (size_t i = 0; i < x.size(); ++i) x[i] = edges[(i / 256) % edges.size()].x[i % 256];
      return write_file(argv[6], x.data(), x.size() * 4) ? 0 : 1;
    }
    if (dist < 0 || (range != "f32" && range != "f16")) return usage();
    const std::vector<float> x =
        kqref::make_inputs(static_cast<kqref::Dist>(dist), std::atoll(argv[4]), std::strtoull(argv[5], nullptr, 0),
                           range == "f16" ? kqref::Range::f16 : kqref::Range::f32);
    return write_file(argv[6], x.data(), x.size() * 4) ? 0 : 1;
  }
  if (cmd == "quantize" && argc == 6) {
    const std::string f = argv[2], m = argv[3];
    const kqref::Format format = f == "q8_0" ? kqref::Format::q8_0 : f == "q4_k" ? kqref::Format::q4_k
                                 : f == "q5_k" ? kqref::Format::q5_k : kqref::Format::q6_k;
    if ((f != "q8_0" && f != "q4_k" && f != "q5_k" && f != "q6_k") || (m != "ggml" && m != "candle"))
      return usage();
    std::ifstream in(argv[4], std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const int64_t n = static_cast<int64_t>(bytes.size() / 4);
    if (n % kqref::block_elems(format) != 0) return usage();
    std::vector<float> x(static_cast<size_t>(n));
    std::memcpy(x.data(), bytes.data(), static_cast<size_t>(n) * 4);
    std::vector<uint8_t> q(static_cast<size_t>(n / kqref::block_elems(format) * kqref::block_bytes(format)));
    kqref::quantize_row(format, m == "ggml" ? kqref::Mode::ggml : kqref::Mode::candle, x.data(), n, q.data());
    return write_file(argv[5], q.data(), q.size()) ? 0 : 1;
  }
  return usage();
}
