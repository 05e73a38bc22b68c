/* kaio.h must compile as strict C99 with every warning an error, and its
 * public structs must keep their layout (bindings hard-code it). */
#include <kaio/kaio.h>

#include <stddef.h>

#define KAIO_ASSERT_C99(name, cond) typedef char name[(cond) ? 1 : -1]
KAIO_ASSERT_C99(tensor_size, sizeof(kaio_tensor) == 48);
KAIO_ASSERT_C99(tensor_dtype, offsetof(kaio_tensor, dtype) == 16);
KAIO_ASSERT_C99(launch_config_size, sizeof(kaio_launch_config) == 32);
KAIO_ASSERT_C99(probe_size, sizeof(kaio_probe_info) == 272);
KAIO_ASSERT_C99(status_is_int32, sizeof(kaio_status) == 4);

int main(void) {
    kaio_tensor t = kaio_tensor_2d(NULL, KAIO_DTYPE_F32, 2, 3);
    return (t.rows == 2 && kaio_status_name(KAIO_OK)[0] == 'K') ? 0 : 1;
}
