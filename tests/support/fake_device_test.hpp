// A fixture for tests on the fake driver: device 0 and a stream on it. It
// skips, saying why, where the fake driver is not loaded; a derived SetUp
// calls this one first and returns if IsSkipped().
#pragma once

#include "support/kaio_test.hpp"

namespace kt {

class FakeDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!on_fake_driver())
      GTEST_SKIP() << "needs the fake driver: run through `meson test` (suite host), which sets "
                      "LIBKAIO_CUDA_DRIVER";
    dev_ = open_device(0);
    stream_ = make_stream(dev_.get());
  }
  Device dev_;
  Stream stream_;
};

}  // namespace kt
