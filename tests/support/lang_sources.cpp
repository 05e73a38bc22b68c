#include "support/lang_sources.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#ifndef KAIO_SOURCE_ROOT
#error "KAIO_SOURCE_ROOT must name the source tree"
#endif

namespace kt {

std::string lang_example(const std::string &name) {
  // KAIO_LANG_EXAMPLES overrides the directory, for runs on another machine
  const char *dir = std::getenv("KAIO_LANG_EXAMPLES");
  const std::string path = (dir ? std::string(dir) : std::string(KAIO_SOURCE_ROOT) + "/examples/lang") +
                           "/" + name + ".kaio";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace kt
