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

bool annotation_pair(const std::string &annotation, const char *key, unsigned out[2]) {
  const std::string needle = std::string(key) + "=";
  const size_t at = annotation.find(needle);
  if (at == std::string::npos || (at > 0 && annotation[at - 1] != ' ')) return false;
  char *end = nullptr;
  out[0] = static_cast<unsigned>(std::strtoul(annotation.c_str() + at + needle.size(), &end, 10));
  if (!end || *end != ',') return false;
  out[1] = static_cast<unsigned>(std::strtoul(end + 1, nullptr, 10));
  return out[0] > 0 && out[1] > 0;
}

}  // namespace kaio
