// The test binary's main: like gtest_main, but a run in which every selected
// test skipped exits 77, so Meson reports the suite as SKIP rather than OK
// (a GPU suite on a machine with no GPU must not look like a pass).
#include <gtest/gtest.h>

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS();
  const ::testing::UnitTest &u = *::testing::UnitTest::GetInstance();
  if (result == 0 && u.test_to_run_count() > 0 && u.skipped_test_count() == u.test_to_run_count())
    return 77;
  return result;
}
