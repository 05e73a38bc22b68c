// The last error keeps a long message whole: a JIT log of hundreds of errors
// reaches kaio_last_error complete (it was once cut at 2048 bytes); only a
// message past 80 KiB is cut, and then it says how many bytes were cut.
#include <cstring>
#include <string>

#include "support/fake_device_test.hpp"

namespace {

class ErrorText : public kt::FakeDeviceTest {
 protected:
  // PTX whose lines 4 .. 3 + errors each hold one error for the fake's JIT.
  static std::string ptx_with_errors(int errors) {
    std::string ptx = ".version 7.0\n.target sm_80\n.address_size 64\n";
    for (int i = 0; i < errors; ++i) ptx += "// KAIO_FAKE_JIT_ERROR\n";
    return ptx + ".visible .entry k()\n{ ret; }\n";
  }
};

TEST_F(ErrorText, ALongJitLogArrivesWhole) {
  const int errors = 300;  // about 33 KB of log
  kaio_module *m = nullptr;
  EXPECT_EQ(kaio_module_load_ptx(&m, dev_.get(), ptx_with_errors(errors).c_str()),
            KAIO_ERROR_PTX_JIT_FAILED);
  EXPECT_EQ(m, nullptr);
  const std::string msg = kaio_last_error();
  EXPECT_GT(msg.size(), 16000u);
  EXPECT_EQ(msg.find("kaio_module_load_ptx"), 0u) << msg.substr(0, 200);
  EXPECT_NE(msg.find("JIT log: ptxas application ptx input, line 4; error"), std::string::npos);
  const std::string last = "line " + std::to_string(3 + errors) + "; error";
  EXPECT_NE(msg.find(last), std::string::npos) << "the last error is missing";
  EXPECT_TRUE(msg.ends_with("ptxas fatal   : Ptx assembly aborted due to errors"))
      << msg.substr(msg.size() - 200);
  EXPECT_EQ(msg.find("truncated"), std::string::npos);
  EXPECT_EQ(msg.find("bytes cut"), std::string::npos);
  // The copy API measures and copies the same whole text.
  EXPECT_EQ(kaio_last_error_copy(nullptr, 0), msg.size());
  std::string copy(msg.size() + 1, '\0');
  EXPECT_EQ(kaio_last_error_copy(copy.data(), copy.size()), msg.size());
  EXPECT_EQ(copy.c_str(), msg);
}

TEST_F(ErrorText, AJitLogPastItsBufferSaysSo) {
  kaio_module *m = nullptr;
  EXPECT_EQ(kaio_module_load_ptx(&m, dev_.get(), ptx_with_errors(1000).c_str()),
            KAIO_ERROR_PTX_JIT_FAILED);
  const std::string msg = kaio_last_error();
  EXPECT_GT(msg.size(), 64u * 1024 - 1);
  EXPECT_TRUE(msg.ends_with("[log truncated by the driver's buffer]")) << msg.substr(msg.size() - 200);
}

TEST_F(ErrorText, AMessagePastTheCapIsCutAndSaysHowMuch) {
  kaio_module *m = nullptr;
  ASSERT_EQ(kaio_module_load_ptx(&m, dev_.get(), ptx_with_errors(0).c_str()), KAIO_OK)
      << kaio_last_error();
  kt::Module module(m);
  const std::string name(100000, 'n');  // echoed back in the message
  kaio_kernel *k = nullptr;
  EXPECT_EQ(kaio_module_get_kernel(&k, m, name.c_str()), KAIO_ERROR_KERNEL_NOT_FOUND);
  const std::string msg = kaio_last_error();
  EXPECT_EQ(msg.find("kaio_module_get_kernel: argument 'name'"), 0u) << msg.substr(0, 200);
  const size_t full = std::strlen("kaio_module_get_kernel: argument 'name' is \"\" but the module "
                                  "has no .entry of that name; check the spelling and that the "
                                  "entry is .visible.") + name.size();
  const std::string note = "... (" + std::to_string(full - 80 * 1024) + " bytes cut)";
  EXPECT_TRUE(msg.ends_with(note)) << msg.substr(msg.size() - 100) << " wanted " << note;
  EXPECT_EQ(msg.size(), 80u * 1024 + note.size());
}

}  // namespace
