/* Links libkaio built as a Meson subproject and runs one op on whatever
 * driver LIBKAIO_CUDA_DRIVER names (check_consumers.sh uses the fake one).
 * Exit status: 0 OK, 1 failure, 2 no usable device. */
#include <kaio/kaio.h>

#include <stdio.h>

int main(void) {
    kaio_device *dev = NULL;
    kaio_stream *stream = NULL;
    kaio_buffer *buf = NULL;
    kaio_op *op = NULL;
    kaio_tensor t[2];
    float ones[32];
    int i, rc = 1;
    kaio_status s;

    for (i = 0; i < 32; ++i) ones[i] = 1.0f;
    if (kaio_device_open(&dev, 0) != KAIO_OK) {
        fprintf(stderr, "use_kaio: %s\n", kaio_last_error());
        return 2;
    }
    s = kaio_stream_create(&stream, dev, KAIO_STREAM_DEFAULT);
    if (s == KAIO_OK) s = kaio_buffer_create(&buf, dev, 2 * sizeof ones);
    if (s == KAIO_OK) s = kaio_buffer_write(buf, 0, ones, sizeof ones);
    if (s == KAIO_OK) s = kaio_op_create_rmsnorm(&op, dev, KAIO_DTYPE_F32, 2, 16, 1e-6f);
    if (s == KAIO_OK) {
        /* x: rows 0-1 of 16, weight: the first row again, out: the second half. */
        t[0] = kaio_tensor_2d(buf, KAIO_DTYPE_F32, 2, 16);
        t[1] = kaio_tensor_2d(buf, KAIO_DTYPE_F32, 1, 16);
        {
            kaio_tensor launch[3];
            launch[0] = t[0];
            launch[1] = t[1];
            launch[2] = kaio_tensor_2d(buf, KAIO_DTYPE_F32, 2, 16);
            launch[2].offset_bytes = sizeof ones;
            s = kaio_op_launch(op, stream, launch, 3);
        }
    }
    if (s == KAIO_OK) s = kaio_stream_synchronize(stream);
    if (s != KAIO_OK) {
        fprintf(stderr, "use_kaio: %s: %s\n", kaio_status_name(s), kaio_last_error());
    } else {
        printf("use_kaio: OK with libkaio %s as a subproject\n", kaio_version_string());
        rc = 0;
    }
    kaio_op_destroy(op);
    kaio_buffer_destroy(buf);
    kaio_stream_destroy(stream);
    kaio_device_destroy(dev);
    return rc;
}
