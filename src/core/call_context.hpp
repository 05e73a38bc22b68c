// The API function the user called, for the duration of that call: what
// error messages from deep inside the library start with, so internal
// functions need not pass the name down.
#pragma once

namespace kaio {

// The name the innermost ApiCall on this thread recorded, or "libkaio"
// outside any API call (a static destructor, a test calling internals).
const char *api_name() noexcept;

// Records `name` (a string literal: it is kept, not copied) for its scope
// and restores the previous name afterwards, so an API function that calls
// another one leaves the outer name in place once the inner one returns.
class ApiCall {
 public:
  explicit ApiCall(const char *name) noexcept;
  ~ApiCall();
  ApiCall(const ApiCall &) = delete;
  ApiCall &operator=(const ApiCall &) = delete;

 private:
  const char *previous_;
};

}  // namespace kaio
