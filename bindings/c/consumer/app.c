/*
 * A C program built against the *installed* libkaio through pkg-config:
 *
 *     cc $(pkg-config --cflags kaio) app.c -o app $(pkg-config --libs kaio)
 *     cc $(pkg-config --cflags kaio) app.c -o app $(pkg-config --static --libs kaio)
 *
 * check_consumers.sh runs it on the fake CUDA driver (LIBKAIO_CUDA_DRIVER):
 * it checks the version, a buffer round trip, an op launch, a user kernel
 * launch with packed arguments, and an error's status and message.
 * Exit status: 0 OK, 1 failure, 2 no usable device.
 */
#include <kaio/kaio.h>

#include <stdio.h>
#include <string.h>

#if !KAIO_VERSION_CHECK(0, 1, 0)
#error "this consumer needs kaio.h 0.1.0 or newer"
#endif

#define CHECK(call)                                                                    \
    do {                                                                               \
        kaio_status s_ = (call);                                                       \
        if (s_ != KAIO_OK) {                                                           \
            const char *name_ = kaio_status_name(s_);                                  \
            fprintf(stderr, "app: %s: %s: %s\n", #call, name_, kaio_last_error());     \
            goto done;                                                                 \
        }                                                                              \
    } while (0)

static const char *kPtx =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry scale(.param .u64 p, .param .f32 s, .param .u32 n)\n{ ret; }\n";

int main(void) {
    int rc = 1;
    kaio_device *dev = NULL;
    kaio_stream *stream = NULL;
    kaio_buffer *x = NULL, *y = NULL, *small = NULL;
    kaio_module *module = NULL;
    kaio_kernel *kernel = NULL;
    kaio_probe_info probe;
    float host[64], back[64];
    unsigned char args[16];
    uint64_t ptr;
    float scale = 2.0f;
    uint32_t n = 64;
    kaio_launch_config cfg;
    kaio_tensor tx, ty, tsmall;
    kaio_status s;
    int i;

    if (kaio_version_number() < KAIO_VERSION_NUMBER) {
        fprintf(stderr, "app: libkaio %s is older than its header %s\n", kaio_version_string(),
                KAIO_VERSION_STRING);
        return 1;
    }
    memset(&probe, 0, sizeof probe);
    probe.struct_size = sizeof probe;
    if (kaio_probe(&probe) != KAIO_OK || probe.driver_status != KAIO_OK || probe.device_count < 1) {
        fprintf(stderr, "app: no usable CUDA device: %s\n", probe.message);
        return 2;
    }

    CHECK(kaio_device_open(&dev, 0));
    CHECK(kaio_stream_create(&stream, dev, KAIO_STREAM_NON_BLOCKING));
    CHECK(kaio_buffer_create(&x, dev, sizeof host));
    CHECK(kaio_buffer_create(&y, dev, sizeof host));
    CHECK(kaio_buffer_create(&small, dev, 64));
    for (i = 0; i < 64; ++i) host[i] = (float)i - 31.5f;
    CHECK(kaio_buffer_write(x, 0, host, sizeof host));
    CHECK(kaio_buffer_read(x, 0, back, sizeof back));
    if (memcmp(host, back, sizeof host) != 0) {
        fprintf(stderr, "app: buffer round trip differs\n");
        goto done;
    }

    tx = kaio_tensor_2d(x, KAIO_DTYPE_F32, 4, 16);
    CHECK(kaio_gelu(stream, &tx, &tx, KAIO_GELU_TANH)); /* in place */
    ty = kaio_tensor_2d(y, KAIO_DTYPE_F32, 4, 16);
    CHECK(kaio_softmax(stream, &tx, &ty));

    /* An error: a 4 x 16 f32 view needs 256 bytes; `small` holds 64. */
    tsmall = kaio_tensor_2d(small, KAIO_DTYPE_F32, 4, 16);
    s = kaio_silu_gate(stream, &tx, &tx, &tsmall);
    if (s != KAIO_ERROR_OUT_OF_BOUNDS || !strstr(kaio_last_error(), "'out'")) {
        fprintf(stderr, "app: expected KAIO_ERROR_OUT_OF_BOUNDS naming 'out', got %s: %s\n",
                kaio_status_name(s), kaio_last_error());
        goto done;
    }

    /* A user kernel with a packed argument buffer: u64 at 0, f32 at 8, u32 at 12. */
    CHECK(kaio_module_load_ptx(&module, dev, kPtx));
    CHECK(kaio_module_get_kernel(&kernel, module, "scale"));
    ptr = kaio_buffer_device_ptr(x);
    memcpy(args, &ptr, 8);
    memcpy(args + 8, &scale, 4);
    memcpy(args + 12, &n, 4);
    memset(&cfg, 0, sizeof cfg);
    cfg.grid[0] = 1;
    cfg.block[0] = 64;
    CHECK(kaio_kernel_launch(kernel, stream, &cfg, args, sizeof args));
    CHECK(kaio_stream_synchronize(stream));

    printf("app: OK against libkaio %s (driver %d, %d devices)\n", kaio_version_string(),
           probe.driver_version, probe.device_count);
    rc = 0;
done:
    kaio_kernel_destroy(kernel);
    kaio_module_destroy(module);
    kaio_buffer_destroy(small);
    kaio_buffer_destroy(y);
    kaio_buffer_destroy(x);
    kaio_stream_destroy(stream);
    kaio_device_destroy(dev);
    return rc;
}
