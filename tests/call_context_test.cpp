// The firewall records the API function the user called (api_name()), so an
// error raised deep inside the library names that function without every
// internal function passing it down; nested calls restore the outer name.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"

namespace {

// Stands for an internal path several calls below the entry point.
kaio_status deep_failure() {
  return kaio::fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'x' is bad.", kaio::api_name());
}
kaio_status middle() { return deep_failure(); }

TEST(CallContext, OutsideAnyCallTheNameIsLibkaio) {
  EXPECT_STREQ(kaio::api_name(), "libkaio");
}

TEST(CallContext, ANestedErrorNamesTheFunctionTheUserCalled) {
  EXPECT_EQ(kaio::firewall("kaio_outer", [] { return middle(); }), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(kaio_last_error(), "kaio_outer: argument 'x' is bad.");
  EXPECT_STREQ(kaio::api_name(), "libkaio");
}

TEST(CallContext, AnInnerCallRestoresTheOuterName) {
  const char *inside = nullptr;
  kaio_status s = kaio::firewall("kaio_outer", [&] {
    EXPECT_EQ(kaio::firewall("kaio_inner",
                             [&] {
                               inside = kaio::api_name();
                               return KAIO_OK;
                             }),
              KAIO_OK);
    return middle();
  });
  EXPECT_EQ(s, KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(inside, "kaio_inner");
  EXPECT_STREQ(kaio_last_error(), "kaio_outer: argument 'x' is bad.");
}

TEST(CallContext, AnExceptionStillRestoresTheName) {
  kaio_status s = kaio::firewall("kaio_outer", []() -> kaio_status {
    return kaio::firewall("kaio_inner", []() -> kaio_status { throw std::runtime_error("boom"); });
  });
  EXPECT_EQ(s, KAIO_ERROR_INTERNAL);
  EXPECT_STREQ(kaio_last_error(), "kaio_inner: internal error: boom. Please report this.");
  EXPECT_STREQ(kaio::api_name(), "libkaio");
}

TEST(CallContext, EachThreadHasItsOwnName) {
  std::string other;
  kaio::firewall("kaio_outer", [&] {
    std::thread([&] { other = kaio::api_name(); }).join();
    return KAIO_OK;
  });
  EXPECT_EQ(other, "libkaio");
}

}  // namespace
