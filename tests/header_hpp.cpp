// kaio.hpp compiles as C++11/20 with every warning an error (and without
// exceptions), and its handles and check() behave, on the fake driver.
#include <kaio/kaio.hpp>

#include <cstdio>
#include <cstring>
#include <utility>

#define EXPECT(cond)                                                   \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                        \
    }                                                                  \
  } while (0)

int main() {
  kaio_device *raw_device = nullptr;
  EXPECT(kaio_device_open(&raw_device, 0) == KAIO_OK);
  kaio::device_ptr device(raw_device);
  kaio_buffer *raw_buffer = nullptr;
  EXPECT(kaio_buffer_create(&raw_buffer, device.get(), 1024) == KAIO_OK);
  kaio::buffer_ptr buffer(raw_buffer);
  // The buffer keeps the device alive: dropping the device first is safe.
  device.reset();
  kaio::buffer_ptr moved = std::move(buffer);
  EXPECT(!buffer && moved && kaio_buffer_size(moved.get()) == 1024);
  moved.reset();
#ifdef KAIO_HPP_EXCEPTIONS
  bool thrown = false;
  try {
    kaio::check(kaio_buffer_create(nullptr, nullptr, 16));
  } catch (const kaio::error &e) {
    thrown = true;
    EXPECT(e.status() == KAIO_ERROR_INVALID_ARGUMENT);
    EXPECT(std::strstr(e.what(), "KAIO_ERROR_INVALID_ARGUMENT: kaio_buffer_create") != nullptr);
  }
  EXPECT(thrown);
  kaio::check(KAIO_OK);
#endif
  return 0;
}
