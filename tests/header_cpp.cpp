// kaio.h must compile as C++ with every warning an error.
#include <kaio/kaio.h>

static_assert(sizeof(kaio_tensor) == 48, "kaio_tensor layout is ABI");
static_assert(sizeof(kaio_device_info) == 296, "kaio_device_info layout is ABI");

int main() {
  kaio_tensor t = kaio_tensor_2d(nullptr, KAIO_DTYPE_BF16, 1, 1);
  return t.dtype == KAIO_DTYPE_BF16 ? 0 : 1;
}
