// Reading libkaio's environment variables. Under glibc secure_getenv, so a
// setuid or setgid program ignores them: LIBKAIO_CUDA_DRIVER names a library
// to dlopen, which must not be the invoking user's choice there.
#pragma once

#include <cstdlib>

namespace kaio {

inline const char *read_env(const char *name) {
#if defined(__GLIBC__)
  return secure_getenv(name);
#else
  return std::getenv(name);
#endif
}

}  // namespace kaio
