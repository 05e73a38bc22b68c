// Every built-in module, as the library stores it (deflated by
// src/kernels/embed_ptx.py), inflates back to its <build>/ptx file byte for byte,
// twice (the second call returns the text inflated by the first), and an
// unknown name gives nullptr.
//   usage: embedded_ptx_test FILE.ptx...
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "kernels/embedded_ptx.hpp"

int main(int argc, char **argv) {
  int failures = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    std::string stem = argv[i];
    stem = stem.substr(stem.find_last_of('/') + 1);
    stem = stem.substr(0, stem.rfind(".ptx"));
    const char *ptx = kaio::embedded_ptx(stem.c_str());
    if (!in || !ptx || text.str() != ptx) {
      std::fprintf(stderr, "FAIL: module '%s' does not inflate to %s\n", stem.c_str(), argv[i]);
      ++failures;
    } else if (kaio::embedded_ptx(stem.c_str()) != ptx) {
      std::fprintf(stderr, "FAIL: module '%s' was inflated twice\n", stem.c_str());
      ++failures;
    }
  }
  if (static_cast<size_t>(argc - 1) != kaio::kEmbeddedModuleCount) {
    std::fprintf(stderr, "FAIL: %d files for %zu embedded modules\n", argc - 1,
                 kaio::kEmbeddedModuleCount);
    ++failures;
  }
  if (kaio::embedded_ptx("no_such_module") != nullptr) {
    std::fprintf(stderr, "FAIL: an unknown module name gave text\n");
    ++failures;
  }
  std::printf("embedded_ptx_test: %d modules, %d failures\n", argc - 1, failures);
  return failures ? 1 : 0;
}
