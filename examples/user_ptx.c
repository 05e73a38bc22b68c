/*
 * user_ptx: runs your own PTX kernel through libkaio's handles.
 *
 * Loads dequant_i8.ptx (or the file named by argv[1]), which turns packed
 * signed bytes into floats: out[4i + j] = (float)(int8 byte j of packed[i]) * scale,
 * launches it over a size that is not a multiple of the block, and checks
 * every output exactly against the CPU.
 *
 * Exit status: 0 on success, 1 on any failure, 2 when there is no usable GPU.
 */
#include <kaio/kaio.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Meson passes the absolute path of the PTX next to this file. */
#ifndef KAIO_EXAMPLE_PTX
#define KAIO_EXAMPLE_PTX "dequant_i8.ptx"
#endif

#define N_WORDS 100003u /* prime: the last block is partly empty */
#define BLOCK 256u
#define GUARD_FLOATS 64u /* checked after the output for stray writes */

/* A power of two: the product is exact, so the GPU must match the CPU bit for
 * bit whatever the host's floating-point evaluation method. */
#define SCALE 0.0078125f

/* The status name is fetched before kaio_last_error(), whose text is only
 * promised to last until the next kaio call on this thread. */
#define CHECK(call)                                                                  \
    do {                                                                             \
        kaio_status check_status_ = (call);                                          \
        if (check_status_ != KAIO_OK) {                                              \
            const char *check_name_ = kaio_status_name(check_status_);               \
            fprintf(stderr, "user_ptx: %s failed: %s: %s\n", #call, check_name_,     \
                    kaio_last_error());                                              \
            goto cleanup;                                                            \
        }                                                                            \
    } while (0)

/* The whole file as a NUL-terminated string (the JIT's input), or NULL. */
static char *read_text_file(const char *path) {
    char *text = NULL;
    long size;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        text = malloc((size_t)size + 1);
        if (text && fread(text, 1, (size_t)size, f) == (size_t)size) {
            text[size] = '\0';
        } else {
            free(text);
            text = NULL;
        }
    }
    fclose(f);
    return text;
}

/* Appends one kernel parameter at its natural alignment, as a C struct of the
 * same members would lay it out: the packing kaio_kernel_launch expects. */
static size_t pack_param(unsigned char *args, size_t offset, const void *value, size_t size) {
    offset = (offset + size - 1) / size * size;
    memcpy(args + offset, value, size);
    return offset + size;
}

static int have_device(void) {
    kaio_probe_info probe;
    memset(&probe, 0, sizeof probe);
    probe.struct_size = sizeof probe;
    if (kaio_probe(&probe) != KAIO_OK) {
        fprintf(stderr, "user_ptx: kaio_probe failed: %s\n", kaio_last_error());
        return 0;
    }
    if (probe.driver_status != KAIO_OK || probe.device_count < 1) {
        fprintf(stderr, "user_ptx: no usable CUDA device: %s\n",
                probe.message[0] ? probe.message : "the driver reports 0 devices");
        return 0;
    }
    return 1;
}

/* Exact comparison with the CPU, plus a check that nothing was written past
 * the last output (the guard was filled with 0xFF bytes). */
static int check_output(const uint32_t *packed, const float *out) {
    uint32_t i, j;
    for (i = 0; i < N_WORDS; ++i) {
        for (j = 0; j < 4; ++j) {
            int byte = (int)((packed[i] >> (8 * j)) & 0xFFu);
            float expected = (float)(byte >= 128 ? byte - 256 : byte) * SCALE;
            float got = out[4 * (size_t)i + j];
            if (memcmp(&got, &expected, sizeof got) != 0) {
                fprintf(stderr, "user_ptx: out[%zu] (word %u, byte %u) is %.9g, expected %.9g\n",
                        4 * (size_t)i + j, i, j, got, expected);
                return 0;
            }
        }
    }
    for (i = 0; i < GUARD_FLOATS; ++i) {
        uint32_t bits;
        memcpy(&bits, &out[4 * (size_t)N_WORDS + i], sizeof bits);
        if (bits != 0xFFFFFFFFu) {
            fprintf(stderr, "user_ptx: the kernel wrote past the output, at float %zu\n",
                    4 * (size_t)N_WORDS + i);
            return 0;
        }
    }
    return 1;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : KAIO_EXAMPLE_PTX;
    const size_t packed_bytes = (size_t)N_WORDS * sizeof(uint32_t);
    const size_t out_bytes = (4 * (size_t)N_WORDS + GUARD_FLOATS) * sizeof(float);
    int exit_code = 1;
    uint32_t i, seed = 12345u, n_words = N_WORDS;
    uint64_t packed_ptr, out_ptr;
    float scale = SCALE;
    unsigned char args[64];
    size_t args_size = 0;
    char *ptx = NULL;
    uint32_t *packed = NULL;
    float *out = NULL;
    kaio_device *dev = NULL;
    kaio_stream *stream = NULL;
    kaio_module *module = NULL;
    kaio_kernel *kernel = NULL;
    kaio_buffer *bpacked = NULL, *bout = NULL;
    kaio_kernel_attributes attrs;
    kaio_launch_config config;

    if (!have_device()) return 2;

    ptx = read_text_file(path);
    if (!ptx) {
        fprintf(stderr, "user_ptx: cannot read PTX file '%s'\n", path);
        goto cleanup;
    }
    packed = malloc(packed_bytes);
    out = malloc(out_bytes);
    if (!packed || !out) {
        fprintf(stderr, "user_ptx: out of host memory\n");
        goto cleanup;
    }
    /* Full 32-bit words, so every byte value, -128 included, turns up. */
    for (i = 0; i < N_WORDS; ++i) {
        seed = seed * 1664525u + 1013904223u;
        packed[i] = seed;
    }

    CHECK(kaio_device_open(&dev, 0));
    CHECK(kaio_stream_create(&stream, dev, KAIO_STREAM_NON_BLOCKING));

    /* A JIT failure comes back as KAIO_ERROR_PTX_JIT_FAILED with the log in
     * kaio_last_error(), which CHECK prints. */
    CHECK(kaio_module_load_ptx(&module, dev, ptx));
    CHECK(kaio_module_get_kernel(&kernel, module, "dequant_i8"));
    memset(&attrs, 0, sizeof attrs);
    attrs.struct_size = sizeof attrs;
    CHECK(kaio_kernel_get_attributes(kernel, &attrs));
    printf("user_ptx: dequant_i8 from %s: %d registers, %d parameter bytes%s\n", path,
           attrs.registers, attrs.param_bytes,
           attrs.param_bytes < 0 ? " (the driver cannot tell)" : "");

    CHECK(kaio_buffer_create(&bpacked, dev, packed_bytes));
    CHECK(kaio_buffer_create(&bout, dev, out_bytes));
    CHECK(kaio_buffer_write(bpacked, 0, packed, packed_bytes));
    CHECK(kaio_buffer_memset(bout, stream, 0, 0xFF, out_bytes));

    /* .param .u64 packed, .param .u64 out, .param .f32 scale, .param .u32 n_words */
    packed_ptr = kaio_buffer_device_ptr(bpacked);
    out_ptr = kaio_buffer_device_ptr(bout);
    args_size = pack_param(args, args_size, &packed_ptr, sizeof packed_ptr);
    args_size = pack_param(args, args_size, &out_ptr, sizeof out_ptr);
    args_size = pack_param(args, args_size, &scale, sizeof scale);
    args_size = pack_param(args, args_size, &n_words, sizeof n_words);

    memset(&config, 0, sizeof config);
    config.grid[0] = (N_WORDS + BLOCK - 1) / BLOCK;
    config.grid[1] = config.grid[2] = 1;
    config.block[0] = BLOCK;
    config.block[1] = config.block[2] = 1;
    CHECK(kaio_kernel_launch(kernel, stream, &config, args, args_size));
    CHECK(kaio_stream_synchronize(stream));
    CHECK(kaio_buffer_read(bout, 0, out, out_bytes));

    if (!check_output(packed, out)) goto cleanup;
    printf("user_ptx: OK (%u words -> %u floats, %u blocks of %u, %zu argument bytes)\n",
           N_WORDS, 4 * N_WORDS, config.grid[0], BLOCK, args_size);
    exit_code = 0;

cleanup:
    kaio_buffer_destroy(bpacked);
    kaio_buffer_destroy(bout);
    kaio_kernel_destroy(kernel);
    kaio_module_destroy(module);
    kaio_stream_destroy(stream);
    kaio_device_destroy(dev);
    free(ptx);
    free(packed);
    free(out);
    return exit_code;
}
