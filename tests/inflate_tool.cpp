// The library's inflate (src/kernels/inflate.cpp, compiled in: it is
// internal) as a command for tests/inflate_check.py, which compares it with
// Python's zlib.
//   usage: inflate_tool IN.deflate SIZE OUT   (exit 0: inflated; 1: rejected)
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <vector>

#include "kernels/inflate.hpp"

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: inflate_tool IN.deflate SIZE OUT\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "inflate_tool: cannot read %s\n", argv[1]);
    return 2;
  }
  const std::vector<unsigned char> packed((std::istreambuf_iterator<char>(in)),
                                          std::istreambuf_iterator<char>());
  const size_t size = std::strtoull(argv[2], nullptr, 10);
  // Exactly sized buffers, so that AddressSanitizer sees any overrun.
  std::vector<unsigned char> out(size);
  if (!kaio::inflate_raw(packed.data(), packed.size(), out.data(), size)) return 1;
  std::ofstream(argv[3], std::ios::binary).write(reinterpret_cast<const char *>(out.data()),
                                                 static_cast<std::streamsize>(size));
  return 0;
}
