//! Host tests on the fake CUDA driver (tests/fake_cuda): two fake devices,
//! host memory as device memory, launches recorded instead of run. They check
//! what crosses the binding: handles, statuses, messages, bytes, launches.
//! Each test skips with a printed reason when the fake driver is unavailable.
mod common;

use common::expect_err;
use kaio::{
    Bf16, Buffer, Device, Dtype, Event, GeluMode, KernelArgs, LaunchConfig, Module, Op, Status, Stream, TensorView,
    F16,
};

const DEQUANT_PTX: &str = include_str!("../../../../examples/dequant_i8.ptx");

/// Parameters of every width, to check the packer against the driver's layout.
const MIXED_PTX: &str = ".version 7.0\n.target sm_80\n.address_size 64\n\
    .visible .entry mixed(.param .u8 a, .param .u32 b, .param .u16 c, .param .u64 d, .param .f32 e, .param .f16 f)\n\
    .maxntid 256, 1, 1\n{ ret; }\n";

fn devices() -> (Device, Device) {
    (Device::open(0).expect("device 0"), Device::open(1).expect("device 1"))
}

#[test]
fn handles_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Device>();
    both::<Stream>();
    both::<Event>();
    both::<Buffer<f32>>();
    both::<Buffer<F16>>();
    both::<TensorView<'static>>();
    both::<Op>();
    both::<Module>();
    both::<kaio::Kernel>();
    both::<kaio::Error>();
}

#[test]
fn version_check_passes_and_matches_the_header() {
    // Needs the library only, not a driver.
    kaio::check_version().expect("version check");
    let rt = kaio::runtime_version();
    assert!(rt.can_run(kaio::COMPILED_VERSION), "{} vs {}", rt, kaio::COMPILED_VERSION);
    assert_eq!(kaio::COMPILED_VERSION.number(), kaio::sys::KAIO_VERSION_NUMBER);
}

#[test]
fn status_names_and_categories() {
    let all = [
        (Status::OK, "KAIO_OK"),
        (Status::INVALID_ARGUMENT, "KAIO_ERROR_INVALID_ARGUMENT"),
        (Status::INVALID_HANDLE, "KAIO_ERROR_INVALID_HANDLE"),
        (Status::INVALID_DTYPE, "KAIO_ERROR_INVALID_DTYPE"),
        (Status::SHAPE_MISMATCH, "KAIO_ERROR_SHAPE_MISMATCH"),
        (Status::OUT_OF_BOUNDS, "KAIO_ERROR_OUT_OF_BOUNDS"),
        (Status::MISALIGNED, "KAIO_ERROR_MISALIGNED"),
        (Status::WRONG_DEVICE, "KAIO_ERROR_WRONG_DEVICE"),
        (Status::BUFFER_TOO_SMALL, "KAIO_ERROR_BUFFER_TOO_SMALL"),
        (Status::INVALID_DIMENSION, "KAIO_ERROR_INVALID_DIMENSION"),
        (Status::UNSUPPORTED, "KAIO_ERROR_UNSUPPORTED"),
        (Status::DRIVER_NOT_FOUND, "KAIO_ERROR_DRIVER_NOT_FOUND"),
        (Status::DRIVER_TOO_OLD, "KAIO_ERROR_DRIVER_TOO_OLD"),
        (Status::NO_DEVICE, "KAIO_ERROR_NO_DEVICE"),
        (Status::UNSUPPORTED_ARCH, "KAIO_ERROR_UNSUPPORTED_ARCH"),
        (Status::OUT_OF_HOST_MEMORY, "KAIO_ERROR_OUT_OF_HOST_MEMORY"),
        (Status::OUT_OF_DEVICE_MEMORY, "KAIO_ERROR_OUT_OF_DEVICE_MEMORY"),
        (Status::PTX_JIT_FAILED, "KAIO_ERROR_PTX_JIT_FAILED"),
        (Status::KERNEL_NOT_FOUND, "KAIO_ERROR_KERNEL_NOT_FOUND"),
        (Status::LAUNCH_FAILED, "KAIO_ERROR_LAUNCH_FAILED"),
        (Status::DEVICE_FAULT, "KAIO_ERROR_DEVICE_FAULT"),
        (Status::DRIVER, "KAIO_ERROR_DRIVER"),
        (Status::INTERNAL, "KAIO_ERROR_INTERNAL"),
    ];
    for (s, name) in all.iter() {
        assert_eq!(s.name(), *name);
        assert_eq!(s.to_string(), *name);
    }
    assert_eq!(Status(-12345).name(), "KAIO_UNKNOWN_STATUS");
    assert_eq!(format!("{:?}", Status::NO_DEVICE), "Status(KAIO_ERROR_NO_DEVICE = -202)");
    assert_eq!(Status::MISALIGNED.category(), Status(-100));
    assert_eq!(Status::NO_DEVICE.category(), Status(-200));
    // Our dtype table agrees with libkaio's.
    for d in Dtype::ALL.iter() {
        assert_eq!(unsafe { kaio::sys::kaio_dtype_size(d.raw()) }, d.size(), "{}", d);
        let name = unsafe { std::ffi::CStr::from_ptr(kaio::sys::kaio_dtype_name(d.raw())) };
        assert_eq!(name.to_str().unwrap(), d.name());
    }
}

#[test]
fn probe_and_device_info_on_the_fake() {
    let _fake = fake_or_skip!("probe_and_device_info_on_the_fake");
    let p = kaio::probe().unwrap();
    assert_eq!(p.driver_status, Status::OK, "{}", p.message);
    assert_eq!(p.device_count, 2);
    assert_eq!(p.driver_version, 13000);
    assert!(p.usable());
    assert_eq!(kaio::device_count().unwrap(), 2);
    let (d0, d1) = devices();
    let i0 = d0.info().unwrap();
    assert_eq!(i0.ordinal, 0);
    assert_eq!(i0.name, "kaio fake device 0");
    assert_eq!(i0.compute_capability, (9, 0));
    assert_eq!(i0.sm_count, 4);
    assert_eq!(i0.l2_cache_bytes, 1 << 20);
    assert_eq!(i0.total_memory, 1 << 30);
    assert_eq!(i0.max_shared_per_block, 232448);
    assert_eq!(d1.info().unwrap().name, "kaio fake device 1");
    assert!(!d0.native_context().is_null());
    assert_ne!(d0.native_context(), d1.native_context());
    let again = d0.try_clone().unwrap();
    assert_eq!(again.native_context(), d0.native_context());
}

#[test]
fn errors_carry_exact_status_and_message() {
    let _fake = fake_or_skip!("errors_carry_exact_status_and_message");
    let (d0, d1) = devices();
    let s0 = Stream::new(&d0).unwrap();
    let s1 = Stream::new(&d1).unwrap();

    // Device ordinal out of range.
    let e = expect_err(Device::open(99), Status::NO_DEVICE, &["kaio_device_open", "'ordinal'", "99", "2 device"]);
    assert_eq!(e.driver_code(), 0);
    assert!(e.to_string().starts_with("KAIO_ERROR_NO_DEVICE: kaio_device_open"), "{}", e);

    // Invalid dimensions.
    expect_err(Op::silu_gate(&d0, Dtype::F32, 0, 4), Status::INVALID_DIMENSION, &["kaio_op_create_silu_gate", "0 x 4"]);
    expect_err(Buffer::<f32>::alloc(&d0, 0), Status::INVALID_DIMENSION, &["kaio_buffer_create", "'size_bytes'"]);
    expect_err(Op::softmax(&d0, Dtype::F32, 1 << 33, 4), Status::INVALID_DIMENSION, &["kaio_op_create_softmax", "rows"]);
    // Wrong dtype and option values.
    expect_err(Op::silu_gate(&d0, Dtype::I8, 4, 4), Status::INVALID_DTYPE, &["kaio_op_create_silu_gate", "'dtype'", "i8"]);
    expect_err(Op::rmsnorm(&d0, Dtype::F32, 4, 4, f32::NAN), Status::INVALID_ARGUMENT, &["'eps'", "nan"]);
    expect_err(Op::rmsnorm(&d0, Dtype::F32, 4, 4, -1.0), Status::INVALID_ARGUMENT, &["'eps'", "-1"]);

    let x0 = Buffer::<f32>::alloc(&d0, 1024).unwrap();
    let small0 = Buffer::<f32>::alloc(&d0, 64).unwrap(); // 256 bytes
    let x1 = Buffer::<f32>::alloc(&d1, 1024).unwrap();
    fn v(b: &Buffer<f32>) -> TensorView<'_> {
        b.view(8, 16)
    }

    // Buffers and streams of two fake devices mixed.
    expect_err(
        kaio::silu_gate(&s0, &v(&x0), &v(&x1), &v(&x0)),
        Status::WRONG_DEVICE,
        &["kaio_silu_gate", "'gate'", "device 1", "device 0"],
    );
    let op = Op::silu_gate(&d0, Dtype::F32, 8, 16).unwrap();
    expect_err(
        op.launch(&s1, &[v(&x0), v(&x0), v(&x0)]),
        Status::WRONG_DEVICE,
        &["kaio_op_launch", "device 0", "'stream'", "device 1"],
    );
    expect_err(x0.memset(&s1, 0, 4, 0), Status::WRONG_DEVICE, &["kaio_buffer_memset", "device 0", "device 1"]);
    let e1 = Event::new(&d0).unwrap();
    expect_err(e1.record(&s1), Status::WRONG_DEVICE, &["'event'", "device 0", "'stream'", "device 1"]);
    expect_err(
        unsafe { Stream::from_raw(&d0, s1.native()) },
        Status::WRONG_DEVICE,
        &["kaio_stream_wrap", "'cu_stream'", "device 0"],
    );

    // A view past the end of its buffer, and offsets.
    expect_err(
        op.launch(&s0, &[v(&x0), v(&x0), v(&small0)]),
        Status::OUT_OF_BOUNDS,
        &["kaio_op_launch", "'out'", "512", "holds 256"],
    );
    expect_err(
        kaio::softmax(&s0, &v(&x0).with_offset(900), &v(&x0)),
        Status::OUT_OF_BOUNDS,
        &["kaio_softmax", "'x'", "offset_bytes 3600"],
    );
    expect_err(
        op.launch(&s0, &[v(&x0).with_offset_bytes(2), v(&x0), v(&x0)]),
        Status::MISALIGNED,
        &["'x'", "offset_bytes 2", "4-byte"],
    );
    expect_err(
        kaio::silu_gate(&s0, &v(&x0).with_row_stride(20), &v(&x0), &v(&x0)),
        Status::UNSUPPORTED,
        &["'x'", "row_stride 20", "contiguous"],
    );
    expect_err(
        op.launch(&s0, &[v(&x0), v(&x0).with_dtype(Dtype::F16), v(&x0)]),
        Status::INVALID_DTYPE,
        &["'gate'", "f16", "f32"],
    );
    expect_err(op.launch(&s0, &[v(&x0), v(&x0)]), Status::INVALID_ARGUMENT, &["'count'", "{x, gate, out}"]);
    expect_err(
        kaio::gelu(&s0, &Buffer::<i32>::alloc(&d0, 128).unwrap().view(8, 16), &v(&x0), GeluMode::Tanh),
        Status::INVALID_DTYPE,
        &["kaio_gelu", "'x'", "i32"],
    );

    // Host copies out of range.
    expect_err(x0.write(1020, &[0.0; 8]), Status::OUT_OF_BOUNDS, &["kaio_buffer_write", "'buffer'", "4096-byte"]);
    expect_err(x0.read(usize::MAX / 2, &mut [0.0; 8]), Status::OUT_OF_BOUNDS, &["kaio_buffer_read"]);
    expect_err(
        x0.copy_from(8, &x0, 0, 64, &s0),
        Status::INVALID_ARGUMENT,
        &["kaio_buffer_copy", "overlap"],
    );
    expect_err(
        Buffer::<f32>::alloc(&d0, 1 << 40),
        Status::OUT_OF_DEVICE_MEMORY,
        &["kaio_buffer_create", "out of device memory"],
    );
}

#[test]
fn foreign_memory_wrapping() {
    let _fake = fake_or_skip!("foreign_memory_wrapping");
    let (d0, d1) = devices();
    let owner = Buffer::<f32>::from_slice(&d0, &(0..256).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let other = Buffer::<f32>::alloc(&d1, 64).unwrap();
    let ptr = owner.device_ptr();
    // A view of another allocation's memory, as a candle CudaSlice would be.
    let view = unsafe { Buffer::<f32>::from_raw_parts(&d0, ptr + 64, 128 * 4) }.unwrap();
    assert!(view.is_foreign());
    assert_eq!(view.len(), 128);
    assert_eq!(view.device_ptr(), ptr + 64);
    assert_eq!(view.to_vec().unwrap()[0], 16.0);
    view.write(0, &[-1.0]).unwrap();
    drop(view); // never frees the memory
    assert_eq!(owner.to_vec().unwrap()[16], -1.0);

    expect_err(
        unsafe { Buffer::<f32>::from_raw_parts(&d0, ptr + 64, 4096) },
        Status::OUT_OF_BOUNDS,
        &["kaio_buffer_wrap", "'device_ptr'", "'size_bytes'"],
    );
    expect_err(
        unsafe { Buffer::<f32>::from_raw_parts(&d0, other.device_ptr(), 64) },
        Status::WRONG_DEVICE,
        &["kaio_buffer_wrap", "device 0"],
    );
    let host = [0u8; 64];
    expect_err(
        unsafe { Buffer::<u8>::from_raw_parts(&d0, host.as_ptr() as u64, 64) },
        Status::INVALID_ARGUMENT,
        &["kaio_buffer_wrap", "not device memory"],
    );
    expect_err(
        unsafe { Buffer::<f32>::from_raw_parts(&d0, ptr, 10) },
        Status::INVALID_ARGUMENT,
        &["from_raw_parts", "'len_bytes' 10", "element size 4"],
    );
    // Reinterpreting foreign bytes as another dtype through a view.
    let bytes = unsafe { Buffer::<u8>::from_raw_parts(&d0, ptr, 1024) }.unwrap();
    let s = Stream::new(&d0).unwrap();
    let probs = Buffer::<f32>::alloc(&d0, 256).unwrap();
    kaio::softmax(&s, &bytes.view(4, 64).with_dtype(Dtype::F32), &probs.view(4, 64)).unwrap();
    expect_err(
        kaio::softmax(&s, &bytes.view(4, 65).with_dtype(Dtype::F32), &probs.view(4, 65)),
        Status::OUT_OF_BOUNDS,
        &["kaio_softmax", "'x'"],
    );
}

#[test]
fn buffers_round_trip_every_dtype() {
    let _fake = fake_or_skip!("buffers_round_trip_every_dtype");
    let (d0, _d1) = devices();
    fn round_trip<T: kaio::Element + PartialEq>(dev: &Device, data: Vec<T>) {
        let b = Buffer::from_slice(dev, &data).unwrap();
        assert_eq!(b.len(), data.len());
        assert_eq!(b.size_bytes(), (data.len() * std::mem::size_of::<T>()) as u64);
        assert_eq!(b.dtype(), T::DTYPE);
        assert_eq!(b.device_ptr() % 256, 0);
        assert_eq!(b.to_vec().unwrap(), data);
        let mut part = vec![T::default(); 3];
        b.read(2, &mut part).unwrap();
        assert_eq!(&part[..], &data[2..5]);
    }
    round_trip(&d0, (0..100).map(|i| i as f32 * 0.5 - 7.0).collect());
    round_trip(&d0, (0..100).map(|i| F16::from_f32(i as f32 / 3.0)).collect());
    round_trip(&d0, (0..100).map(|i| Bf16::from_f32(-(i as f32) * 1.5)).collect());
    round_trip(&d0, (0..100).map(|i| (i as i8).wrapping_mul(3)).collect());
    round_trip(&d0, (0..100).map(|i| i as u8).collect());
    round_trip(&d0, (0..100).map(|i| i * -1000).collect::<Vec<i32>>());
    round_trip(&d0, (0..100).map(|i| u32::MAX - i).collect::<Vec<u32>>());

    // memset, copy and the async forms (the fake runs them at once).
    let s = Stream::non_blocking(&d0).unwrap();
    let a = Buffer::<u32>::alloc(&d0, 64).unwrap();
    let b = Buffer::<u32>::alloc(&d0, 64).unwrap();
    a.memset(&s, 0, 64, 0xAB).unwrap();
    a.memset(&s, 10, 2, 0).unwrap();
    b.zero(&s).unwrap();
    b.copy_from(4, &a, 8, 8, &s).unwrap();
    s.synchronize().unwrap();
    let got = b.to_vec().unwrap();
    assert_eq!(got[3], 0);
    assert_eq!(got[4], 0xABAB_ABAB);
    assert_eq!(&got[6..8], &[0, 0]);
    assert_eq!(got[11], 0xABAB_ABAB);
    assert_eq!(got[12], 0);
    let src: Vec<u32> = (0..64).collect();
    let mut dst = vec![0u32; 64];
    unsafe {
        a.write_async(&s, 0, &src).unwrap();
        a.read_async(&s, 0, &mut dst).unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(dst, src);
}

#[test]
fn streams_and_events() {
    let _fake = fake_or_skip!("streams_and_events");
    let (d0, _d1) = devices();
    let a = Stream::new(&d0).unwrap();
    let b = Stream::non_blocking(&d0).unwrap();
    let legacy = Stream::legacy(&d0).unwrap();
    assert!(legacy.native().is_null());
    assert!(legacy.is_foreign());
    assert!(!a.native().is_null());
    // Wrap a stream we did not create through kaio (here: b's CUstream).
    let wrapped = unsafe { Stream::from_raw(&d0, b.native()) }.unwrap();
    assert_eq!(wrapped.native(), b.native());
    drop(wrapped); // never destroys b's CUstream
    b.synchronize().unwrap();

    let start = Event::new(&d0).unwrap();
    let end = Event::new(&d0).unwrap();
    start.record(&a).unwrap();
    end.record(&a).unwrap();
    b.wait_event(&end).unwrap();
    end.synchronize().unwrap();
    assert_eq!(Event::elapsed_ms(&start, &end).unwrap(), 0.25); // the fake's answer
    let untimed = Event::without_timing(&d0).unwrap();
    untimed.record(&a).unwrap();
    expect_err(
        Event::elapsed_ms(&start, &untimed),
        Status::INVALID_ARGUMENT,
        &["kaio_event_elapsed_ms", "'end'", "KAIO_EVENT_DISABLE_TIMING"],
    );
    legacy.synchronize().unwrap();
}

/// A view of raw bytes as `dt`.
fn as_dtype(b: &Buffer<u8>, rows: usize, cols: usize, dt: Dtype) -> TensorView<'_> {
    TensorView::new(b, rows, cols).with_dtype(dt)
}

#[test]
fn every_op_launches_on_the_fake() {
    let fake = fake_or_skip!("every_op_launches_on_the_fake");
    let (d0, _d1) = devices();
    let s = Stream::non_blocking(&d0).unwrap();
    let (rows, cols) = (3, 1000);
    fn check_launched(fake: &common::Fake, before: u64, what: &str) {
        assert!(fake.launches() > before, "{} did not launch", what);
        let l = fake.last().unwrap();
        assert!(!l.name.is_empty() && l.grid[0] >= 1 && l.block[0] >= 1, "{}: {:?}", what, l);
    }
    for &dt in &[Dtype::F32, Dtype::F16, Dtype::Bf16] {
        let bytes = rows * cols * dt.size();
        let x = Buffer::<u8>::alloc(&d0, bytes).unwrap();
        let g = Buffer::<u8>::alloc(&d0, bytes).unwrap();
        let o = Buffer::<u8>::alloc(&d0, bytes).unwrap();
        let w = Buffer::<u8>::alloc(&d0, cols * dt.size()).unwrap();
        let v = |b| as_dtype(b, rows, cols, dt);
        let wv = TensorView::new(&w, 1, cols).with_dtype(dt);

        let n = fake.launches();
        kaio::silu_gate(&s, &v(&x), &v(&g), &v(&o)).unwrap();
        check_launched(&fake, n, "silu_gate");
        for &mode in &[GeluMode::Erf, GeluMode::Tanh] {
            let n = fake.launches();
            kaio::gelu(&s, &v(&x), &v(&o), mode).unwrap();
            check_launched(&fake, n, "gelu");
            let n = fake.launches();
            Op::gelu(&d0, dt, rows, cols, mode).unwrap().launch(&s, &[v(&x), v(&x)]).unwrap(); // in place
            check_launched(&fake, n, "gelu op");
        }
        let n = fake.launches();
        kaio::rmsnorm(&s, &v(&x), &wv, &v(&o), 1e-5).unwrap();
        check_launched(&fake, n, "rmsnorm");
        let n = fake.launches();
        kaio::softmax(&s, &v(&x), &v(&o)).unwrap();
        check_launched(&fake, n, "softmax");

        // Prepared handles, launched repeatedly.
        let silu = Op::silu_gate(&d0, dt, rows, cols).unwrap();
        let rms = Op::rmsnorm(&d0, dt, rows, cols, 1e-6).unwrap();
        let sm = Op::softmax(&d0, dt, rows, cols).unwrap();
        assert_eq!(silu.kind(), "silu_gate");
        let n = fake.launches();
        for _ in 0..3 {
            silu.launch(&s, &[v(&x), v(&g), v(&o)]).unwrap();
            rms.launch(&s, &[v(&x), wv, v(&o)]).unwrap();
            sm.launch(&s, &[v(&x), v(&o)]).unwrap();
        }
        assert!(fake.launches() >= n + 9);
        // Row ops honour a row stride: 2 rows of 400 inside rows of 1000.
        let strided = |b| as_dtype(b, 2, 400, dt).with_row_stride(1000);
        let n = fake.launches();
        kaio::softmax(&s, &strided(&x), &strided(&o)).unwrap();
        check_launched(&fake, n, "strided softmax");
    }
    s.synchronize().unwrap();
}

#[test]
fn module_and_kernel_with_packed_arguments() {
    let fake = fake_or_skip!("module_and_kernel_with_packed_arguments");
    let (d0, _d1) = devices();
    let s = Stream::non_blocking(&d0).unwrap();

    let m = Module::load_ptx(&d0, DEQUANT_PTX).unwrap();
    let k = m.kernel("dequant_i8").unwrap();
    let attrs = k.attributes().unwrap();
    assert_eq!(attrs.param_bytes, Some(24));
    assert_eq!(attrs.registers, 32);
    let packed = Buffer::<u32>::alloc(&d0, 100).unwrap();
    let out = Buffer::<f32>::alloc(&d0, 400).unwrap();
    let args = KernelArgs::new().ptr(&packed).ptr(&out).arg(0.5f32).arg(100u32);
    assert_eq!(args.len(), 24);
    let cfg = LaunchConfig::linear(100, 64);
    let n = fake.launches();
    unsafe { k.launch(&s, &cfg, &args) }.unwrap();
    assert_eq!(fake.launches(), n + 1);
    let l = fake.last().unwrap();
    assert_eq!(l.name, "dequant_i8");
    assert_eq!(l.grid, [2, 1, 1]);
    assert_eq!(l.block, [64, 1, 1]);
    assert_eq!(fake.param(0, 8).unwrap(), packed.device_ptr().to_ne_bytes());
    assert_eq!(fake.param(1, 8).unwrap(), out.device_ptr().to_ne_bytes());
    assert_eq!(fake.param(2, 4).unwrap(), 0.5f32.to_ne_bytes());
    assert_eq!(fake.param(3, 4).unwrap(), 100u32.to_ne_bytes());

    // Every width: the packer's offsets are the driver's.
    let mixed = Module::load_ptx(&d0, MIXED_PTX).unwrap().kernel("mixed").unwrap();
    let a = mixed.attributes().unwrap();
    assert_eq!(a.max_threads_per_block, 256);
    let args = KernelArgs::new()
        .arg(7u8)
        .arg(-5i32)
        .arg(0xBEEFu16)
        .ptr_at(&out, 3)
        .arg(2.5f32)
        .arg(F16::from_f32(-1.0));
    assert_eq!(Some(args.len()), a.param_bytes);
    let cfg = LaunchConfig { grid: [2, 3, 1], block: [16, 4, 2], shared_bytes: 1024 };
    unsafe { mixed.launch(&s, &cfg, &args) }.unwrap();
    let l = fake.last().unwrap();
    assert_eq!((l.name.as_str(), l.grid, l.block, l.shared), ("mixed", [2, 3, 1], [16, 4, 2], 1024));
    assert_eq!(fake.param(0, 1).unwrap(), vec![7]);
    assert_eq!(fake.param(1, 4).unwrap(), (-5i32).to_ne_bytes());
    assert_eq!(fake.param(2, 2).unwrap(), 0xBEEFu16.to_ne_bytes());
    assert_eq!(fake.param(3, 8).unwrap(), (out.device_ptr() + 12).to_ne_bytes());
    assert_eq!(fake.param(4, 4).unwrap(), 2.5f32.to_ne_bytes());
    assert_eq!(fake.param(5, 2).unwrap(), 0xBC00u16.to_ne_bytes());

    // Failures: JIT log, unknown kernel, argument size, launch shape, NUL.
    let e = expect_err(
        Module::load_ptx(&d0, "this is not ptx"),
        Status::PTX_JIT_FAILED,
        &["kaio_module_load_ptx", "JIT log", "fake JIT rejected"],
    );
    assert_ne!(e.driver_code(), 0);
    expect_err(m.kernel("no_such_kernel"), Status::KERNEL_NOT_FOUND, &["kaio_module_get_kernel", "'name'", "no_such_kernel"]);
    expect_err(
        unsafe { k.launch(&s, &LaunchConfig::linear(100, 64), &[0u8; 12]) },
        Status::INVALID_ARGUMENT,
        &["'args_size'", "12", "24"],
    );
    let zero = LaunchConfig { grid: [0, 1, 1], block: [32, 1, 1], shared_bytes: 0 };
    expect_err(unsafe { k.launch(&s, &zero, &args) }, Status::INVALID_DIMENSION, &["kaio_kernel_launch", "grid (0, 1, 1)"]);
    expect_err(Module::load_ptx(&d0, "a\0b"), Status::INVALID_ARGUMENT, &["Module::load_ptx", "'ptx'", "offset 1"]);
    expect_err(m.kernel("a\0"), Status::INVALID_ARGUMENT, &["Module::kernel", "'name'"]);
}

#[test]
fn errors_stay_with_their_thread() {
    let _fake = fake_or_skip!("errors_stay_with_their_thread");
    let dev = std::sync::Arc::new(Device::open(0).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let dev = dev.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let ordinal = 100 + t * 1000 + i;
                    let e = Device::open(ordinal).unwrap_err();
                    assert!(e.message().contains(&ordinal.to_string()), "{}", e);
                    let b = Buffer::<f32>::alloc(&dev, 16).unwrap();
                    let e = b.write(16, &[1.0]).unwrap_err();
                    assert_eq!(e.status(), Status::OUT_OF_BOUNDS);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn objects_outlive_their_device_handle() {
    let _fake = fake_or_skip!("objects_outlive_their_device_handle");
    let dev = Device::open(0).unwrap();
    let s = Stream::new(&dev).unwrap();
    let b = Buffer::from_slice(&dev, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let op = Op::gelu(&dev, Dtype::F32, 1, 4, GeluMode::Erf).unwrap();
    drop(dev); // children keep the device alive
    op.launch(&s, &[b.view(1, 4), b.view(1, 4)]).unwrap();
    s.synchronize().unwrap();
    assert_eq!(b.to_vec().unwrap().len(), 4);
}

#[test]
fn matmul_descs_default_to_libkaio_defaults() {
    // Needs the library only.
    let mut c = kaio::sys::kaio_matmul_desc::default();
    assert_eq!(unsafe { kaio::sys::kaio_matmul_desc_init(&mut c, std::mem::size_of_val(&c)) }, 0);
    assert_eq!(kaio::MatmulDesc::default().to_raw().unwrap(), c);
    let mut b = kaio::sys::kaio_matmul_backward_desc::default();
    assert_eq!(unsafe { kaio::sys::kaio_matmul_backward_desc_init(&mut b, std::mem::size_of_val(&b)) }, 0);
    assert_eq!(kaio::MatmulBackwardDesc::default().to_raw().unwrap(), b);
}

#[test]
fn matmul_launches_and_reports_errors_on_the_fake() {
    use kaio::{MatmulBackwardDesc, MatmulDesc, MatmulTc, MatmulVariant, Trans};
    let fake = fake_or_skip!("matmul_launches_and_reports_errors_on_the_fake");
    let (d0, _d1) = devices();
    let s = Stream::non_blocking(&d0).unwrap();
    let (m, n, k) = (16, 8, 32);
    let a = Buffer::<F16>::alloc(&d0, m * k).unwrap();
    let bt = Buffer::<F16>::alloc(&d0, n * k).unwrap(); // B stored N x K (nn.Linear)
    let b = Buffer::<F16>::alloc(&d0, k * n).unwrap();
    let a16 = Buffer::<Bf16>::alloc(&d0, m * k).unwrap();
    let b16 = Buffer::<Bf16>::alloc(&d0, k * n).unwrap();
    let c = Buffer::<f32>::alloc(&d0, m * n).unwrap();
    let ch = Buffer::<F16>::alloc(&d0, m * n).unwrap();
    let desc = MatmulDesc { trans_b: Trans::T, m, n, k, alpha: 0.5, beta: 1.0, ..Default::default() };

    let launched = |before: u64, what: &str| assert!(fake.launches() > before, "{} did not launch", what);
    let fwd = Op::matmul(&d0, &desc).unwrap();
    assert_eq!(fwd.kind(), "matmul");
    let n0 = fake.launches();
    fwd.launch(&s, &[a.view(m, k), bt.view(n, k), c.view(m, n)]).unwrap();
    launched(n0, "prepared matmul");
    for &variant in &[MatmulVariant::Auto, MatmulVariant::Sync, MatmulVariant::Async] {
        let d = MatmulDesc { trans_b: Trans::T, out_dtype: Dtype::F16, variant, ..Default::default() };
        let n0 = fake.launches();
        kaio::matmul(&s, &a.view(m, k), &bt.view(n, k), &ch.view(m, n), &d).unwrap();
        launched(n0, "one-shot matmul");
    }
    for &(kind, bf) in &[(MatmulTc::F16, false), (MatmulTc::F16Async, false), (MatmulTc::Bf16, true), (MatmulTc::Bf16Async, true)] {
        let (av, bv) = if bf { (a16.view(m, k), b16.view(k, n)) } else { (a.view(m, k), b.view(k, n)) };
        let n0 = fake.launches();
        kaio::matmul_tc(&s, kind, &av, &bv, &c.view(m, n)).unwrap();
        Op::matmul_tc(&d0, kind, m, n, k).unwrap().launch(&s, &[av, bv, c.view(m, n)]).unwrap();
        assert!(fake.launches() >= n0 + 2, "{:?}", kind);
    }

    // Backward: dA = dC·Bᵀ (m×k), dB = Aᵀ·dC (k×n); either may be skipped.
    let dc = Buffer::<F16>::alloc(&d0, m * n).unwrap();
    let dc32 = Buffer::<f32>::alloc(&d0, m * n).unwrap();
    let da = Buffer::<f32>::alloc(&d0, m * k).unwrap();
    let db = Buffer::<f32>::alloc(&d0, k * n).unwrap();
    let n0 = fake.launches();
    kaio::matmul_tc_backward(&s, &dc.view(m, n), &a.view(m, k), &b.view(k, n), Some(&da.view(m, k)), Some(&db.view(k, n)))
        .unwrap();
    assert!(fake.launches() >= n0 + 2, "backward launches two products");
    let n0 = fake.launches();
    kaio::matmul_tc_backward(&s, &dc.view(m, n), &a.view(m, k), &b.view(k, n), None, Some(&db.view(k, n))).unwrap();
    assert_eq!(fake.launches(), n0 + 1, "dA skipped");
    let bw = MatmulBackwardDesc { grad_dtype: Dtype::F32, m, n, k, beta: 1.0, ..Default::default() };
    let op = Op::matmul_backward(&d0, &bw).unwrap();
    let n0 = fake.launches();
    op.launch(&s, &[dc32.view(m, n), a.view(m, k), b.view(k, n), da.view(m, k), TensorView::none()]).unwrap();
    assert!(fake.launches() >= n0 + 2, "f32 dC is rounded, then dA");
    s.synchronize().unwrap();

    // Errors, with libkaio's messages.
    expect_err(Op::matmul(&d0, &MatmulDesc { k: 12, ..desc }), Status::INVALID_DIMENSION, &["K is 12", "multiple of 8"]);
    expect_err(Op::matmul(&d0, &MatmulDesc { in_dtype: Dtype::F32, ..desc }), Status::INVALID_DTYPE, &["in_dtype", "f32"]);
    expect_err(Op::matmul(&d0, &MatmulDesc { alpha: f32::INFINITY, ..desc }), Status::INVALID_ARGUMENT, &["alpha is inf"]);
    // A transposed by mistake: K x M instead of M x K.
    expect_err(
        fwd.launch(&s, &[a.view(k, m), bt.view(n, k), c.view(m, n)]),
        Status::SHAPE_MISMATCH,
        &["kaio_op_launch", "'A' is 32 x 16", "16 x 32"],
    );
    expect_err(
        kaio::matmul_tc_backward(&s, &dc32.view(m, n), &a.view(m, k), &b.view(k, n), Some(&da.view(m, k)), None),
        Status::UNSUPPORTED,
        &["kaio_matmul_tc_backward", "'dC' is f32", "kaio_op_create_matmul_backward"],
    );
    expect_err(
        kaio::silu_gate(&s, &TensorView::none(), &TensorView::none(), &TensorView::none()),
        Status::INVALID_HANDLE,
        &["kaio_silu_gate", "'x'"],
    );
}
