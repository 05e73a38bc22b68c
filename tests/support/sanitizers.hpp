// Whether the tests are built with AddressSanitizer (.ci/sanitize.sh), and
// what that costs: tests that bound time or stack scale their bounds by it.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define KT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KT_ASAN 1
#endif
#endif

namespace kt {

#ifdef KT_ASAN
// ASan + UBSan run the compiler ~5x slower (7 ms for a 20-line kernel on a
// loaded 2-core machine), with frames ~5x larger.
constexpr double kSanitizerSlowdown = 20;
constexpr bool kAsan = true;
#else
constexpr double kSanitizerSlowdown = 1;
constexpr bool kAsan = false;
#endif

}  // namespace kt
