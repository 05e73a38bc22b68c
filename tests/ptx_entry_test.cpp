// ptx_single_entry on every built-in PTX file: each carved module holds its
// module-scope text and exactly the one entry asked for, and (where ptxas is
// on PATH) the first entry of each file assembles on its own.
//   usage: ptx_entry_test FILE.ptx...
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/ptx_entry.hpp"

namespace {

int failures = 0;

void expect(bool ok, const std::string &what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}

std::vector<std::string> entries_of(const std::string &text) {
  std::vector<std::string> names;
  const std::regex re(R"(^(?:\.visible\s+)?\.entry\s+(\w+))", std::regex::multiline);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1]);
  return names;
}

bool have_ptxas() { return std::system("ptxas --version > /dev/null 2>&1") == 0; }

}  // namespace

int main(int argc, char **argv) {
  const bool ptxas = have_ptxas();
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i]);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const std::vector<std::string> names = entries_of(text);
    expect(!names.empty(), std::string(argv[i]) + ": no entries found");
    std::smatch target;
    std::regex_search(text, target, std::regex(R"(\.target\s+(\w+))"));
    for (const std::string &name : names) {
      const std::string one = kaio::ptx_single_entry(text.c_str(), name.c_str());
      const std::vector<std::string> got = entries_of(one);
      expect(got.size() == 1 && got[0] == name, name + ": carved module holds " +
                                                    std::to_string(got.size()) + " entries");
      for (const char *scope : {".version", ".target", ".address_size"})
        expect(one.find(scope) != std::string::npos, name + ": lost " + scope);
      if (text.find(".extern .shared") != std::string::npos)
        expect(one.find(".extern .shared") != std::string::npos, name + ": lost .extern .shared");
    }
    expect(kaio::ptx_single_entry(text.c_str(), "no_such_kernel").empty(),
           std::string(argv[i]) + ": an unknown entry must give \"\"");
    if (ptxas && !names.empty()) {
      const std::string one = kaio::ptx_single_entry(text.c_str(), names[0].c_str());
      const std::string path = "ptx_entry_test_" + names[0] + ".ptx";
      std::ofstream(path) << one;
      const std::string cmd = "ptxas -arch=" + std::string(target[1]) + " " + path +
                              " -o /dev/null";
      expect(std::system(cmd.c_str()) == 0, names[0] + ": carved module does not assemble");
      std::remove(path.c_str());
    }
    std::printf("%s: %zu entries carved%s\n", argv[i], names.size(),
                ptxas ? ", first one assembled" : " (no ptxas: assembly skipped)");
  }
  return failures ? 1 : 0;
}
