#include "kernels/ptx_annotations.hpp"

#include <cstdlib>
#include <cstring>

namespace kaio {

std::string ptx_annotation(const char *ptx, const char *tag, const char *entry) {
  const std::string prefix = std::string("// kaio-") + tag + ": " + entry + " ";
  for (const char *p = std::strstr(ptx, prefix.c_str()); p;
       p = std::strstr(p + 1, prefix.c_str())) {
    if (p != ptx && p[-1] != '\n') continue;  // only whole lines
    const char *start = p + prefix.size();
    const char *end = std::strchr(start, '\n');
    return end ? std::string(start, end) : std::string(start);
  }
  return "";
}

int64_t annotation_value(const std::string &annotation, const char *key, int64_t fallback) {
  const std::string needle = std::string(key) + "=";
  for (size_t pos = annotation.find(needle); pos != std::string::npos;
       pos = annotation.find(needle, pos + 1)) {
    if (pos == 0 || annotation[pos - 1] == ' ')
      return std::strtoll(annotation.c_str() + pos + needle.size(), nullptr, 10);
  }
  return fallback;
}

}  // namespace kaio
