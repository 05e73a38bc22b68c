package kaio_test

// Host tests on libkaio's fake CUDA driver (tests/fake_cuda): two fake
// devices, host memory as device memory, launches recorded instead of run.
// LIBKAIO_CUDA_DRIVER must name it (the build's tests/libkaio_fake_cuda.so);
// without it the tests that need a driver skip and say so. The GPU tests
// (gpu_test.go) need the real driver instead, so one process runs one kind.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"kaio.dev/kaio"
	"kaio.dev/kaio/internal/fakedriver"
)

var (
	fake       *fakedriver.Hooks
	fakeReason string
)

const missingDriver = "/nonexistent/libcuda.so.1"

func TestMain(m *testing.M) {
	if os.Getenv("KAIO_GO_TEST_CHILD") == "nodriver" {
		os.Exit(noDriverChild())
	}
	path := os.Getenv("LIBKAIO_CUDA_DRIVER")
	if path == "" {
		fakeReason = "LIBKAIO_CUDA_DRIVER is unset: set it to <meson builddir>/tests/libkaio_fake_cuda.so to run the host tests"
	} else if h, err := fakedriver.Open(path); err != nil {
		fakeReason = "LIBKAIO_CUDA_DRIVER is not the fake driver: " + err.Error()
	} else {
		fake = h
	}
	os.Exit(m.Run())
}

func needFake(t *testing.T) *fakedriver.Hooks {
	t.Helper()
	if fake == nil {
		t.Skip(fakeReason)
	}
	return fake
}

func open2(t *testing.T) (*kaio.Device, *kaio.Device) {
	t.Helper()
	d0, err := kaio.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	d1, err := kaio.OpenDevice(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d0.Close(); d1.Close() })
	return d0, d1
}

// must(f()).get(t) is f's value, or the test's end with f's error.
func must[T any](v T, err error) result[T] { return result[T]{v, err} }

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) get(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// expectErr checks the exact status and every part of the message.
func expectErr(t *testing.T, err error, status kaio.Status, parts ...string) *kaio.Error {
	t.Helper()
	var ke *kaio.Error
	if !errors.As(err, &ke) {
		t.Fatalf("want %v, got %v", status, err)
	}
	if ke.Status != status {
		t.Fatalf("want %v, got %v: %s", status, ke.Status, ke.Message)
	}
	for _, p := range parts {
		if !strings.Contains(ke.Message, p) {
			t.Errorf("message lacks %q: %s", p, ke.Message)
		}
	}
	return ke
}

func TestStatusNamesAndVersion(t *testing.T) {
	names := map[kaio.Status]string{
		kaio.StatusOK: "KAIO_OK", kaio.StatusInvalidArgument: "KAIO_ERROR_INVALID_ARGUMENT",
		kaio.StatusInvalidHandle: "KAIO_ERROR_INVALID_HANDLE", kaio.StatusInvalidDType: "KAIO_ERROR_INVALID_DTYPE",
		kaio.StatusShapeMismatch: "KAIO_ERROR_SHAPE_MISMATCH", kaio.StatusOutOfBounds: "KAIO_ERROR_OUT_OF_BOUNDS",
		kaio.StatusMisaligned: "KAIO_ERROR_MISALIGNED", kaio.StatusWrongDevice: "KAIO_ERROR_WRONG_DEVICE",
		kaio.StatusBufferTooSmall: "KAIO_ERROR_BUFFER_TOO_SMALL", kaio.StatusInvalidDimension: "KAIO_ERROR_INVALID_DIMENSION",
		kaio.StatusUnsupported: "KAIO_ERROR_UNSUPPORTED", kaio.StatusDriverNotFound: "KAIO_ERROR_DRIVER_NOT_FOUND",
		kaio.StatusDriverTooOld: "KAIO_ERROR_DRIVER_TOO_OLD", kaio.StatusNoDevice: "KAIO_ERROR_NO_DEVICE",
		kaio.StatusUnsupportedArch: "KAIO_ERROR_UNSUPPORTED_ARCH", kaio.StatusOutOfHostMemory: "KAIO_ERROR_OUT_OF_HOST_MEMORY",
		kaio.StatusOutOfDeviceMemory: "KAIO_ERROR_OUT_OF_DEVICE_MEMORY", kaio.StatusPTXJITFailed: "KAIO_ERROR_PTX_JIT_FAILED",
		kaio.StatusKernelNotFound: "KAIO_ERROR_KERNEL_NOT_FOUND", kaio.StatusLaunchFailed: "KAIO_ERROR_LAUNCH_FAILED",
		kaio.StatusDeviceFault: "KAIO_ERROR_DEVICE_FAULT", kaio.StatusDriver: "KAIO_ERROR_DRIVER",
		kaio.StatusInternal: "KAIO_ERROR_INTERNAL", kaio.Status(-12345): "KAIO_UNKNOWN_STATUS",
	}
	for s, want := range names {
		if s.String() != want {
			t.Errorf("%d: %q, want %q", int32(s), s.String(), want)
		}
	}
	if kaio.StatusMisaligned.Category() != -100 || kaio.StatusNoDevice.Category() != -200 ||
		kaio.StatusDeviceFault.Category() != -500 || kaio.StatusOK.Category() != 0 {
		t.Error("categories")
	}
	if kaio.DTypeBF16.Size() != 2 || kaio.DTypeU32.String() != "u32" || kaio.DType(99).Size() != 0 {
		t.Error("dtype table")
	}
	ok(t, kaio.CheckVersion())
	rt, ct := kaio.RuntimeVersion(), kaio.CompiledVersion()
	if !rt.CanRun(ct) || ct.String() != "0.1.0" {
		t.Errorf("runtime %v, compiled %v", rt, ct)
	}
	for _, c := range []struct {
		rt, ct kaio.Version
		ok     bool
	}{{100, 100, true}, {105, 100, true}, {99, 100, false}, {200, 100, false}, {10300, 10203, true}, {10202, 10203, false}, {20000, 10203, false}} {
		if c.rt.CanRun(c.ct) != c.ok {
			t.Errorf("%v.CanRun(%v) != %v", c.rt, c.ct, c.ok)
		}
	}
}

func TestHalfConversions(t *testing.T) {
	cases := []struct {
		f    float32
		bits uint16
	}{
		{0, 0}, {1, 0x3C00}, {-2, 0xC000}, {65504, 0x7BFF}, {float32(math.Ldexp(1, -24)), 1},
		{float32(math.Inf(1)), 0x7C00},
		{1 + float32(math.Ldexp(1, -11)), 0x3C00},   // tie to even
		{1 + 3*float32(math.Ldexp(1, -11)), 0x3C02}, // tie to even, upward
		{65520, 0x7C00}, {float32(math.Ldexp(1, -25)), 0}, {3 * float32(math.Ldexp(1, -25)), 2},
	}
	for _, c := range cases {
		if got := kaio.F16FromFloat32(c.f); uint16(got) != c.bits {
			t.Errorf("F16(%g) = %#x, want %#x", c.f, uint16(got), c.bits)
		}
	}
	for b := 0; b <= 0xFFFF; b++ {
		h := kaio.F16(b)
		if f := h.Float32(); f == f && kaio.F16FromFloat32(f) != h {
			t.Fatalf("f16 %#x does not round-trip", b)
		}
		bf := kaio.BF16(b)
		if f := bf.Float32(); f == f && kaio.BF16FromFloat32(f) != bf {
			t.Fatalf("bf16 %#x does not round-trip", b)
		}
	}
	if kaio.BF16FromFloat32(1+float32(math.Ldexp(1, -8))) != 0x3F80 || kaio.BF16FromFloat32(1+3*float32(math.Ldexp(1, -8))) != 0x3F82 {
		t.Error("bf16 ties to even")
	}
	if f := kaio.F16FromFloat32(float32(math.NaN())).Float32(); f == f {
		t.Error("f16 NaN")
	}
}

func TestArgsPacking(t *testing.T) {
	a := new(kaio.Args).U8(1).U32(2).U16(3).U64(4).F16(kaio.F16FromFloat32(1))
	want := []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x3C}
	if !bytes.Equal(a.Bytes(), want) {
		t.Fatalf("% x", a.Bytes())
	}
	if n := new(kaio.Args).U64(1).U64(2).F32(0.5).U32(7).Len(); n != 24 {
		t.Fatal(n)
	}
	if b := new(kaio.Args).I8(1).Align(16).Raw([]byte{9, 9, 9}, 4); b.Len() != 19 {
		t.Fatal(b.Len())
	}
	if c := kaio.Linear(1000, 256); c.Grid != [3]uint32{4, 1, 1} || c.Block != [3]uint32{256, 1, 1} {
		t.Fatal(c)
	}
}

func TestProbeAndDeviceInfo(t *testing.T) {
	needFake(t)
	p := must(kaio.Probe()).get(t)
	if p.DriverStatus != kaio.StatusOK || p.DeviceCount != 2 || p.DriverVersion != 13000 || !p.Usable() {
		t.Fatalf("%+v", p)
	}
	if n := must(kaio.DeviceCount()).get(t); n != 2 {
		t.Fatal(n)
	}
	d0, d1 := open2(t)
	i0 := must(d0.Info()).get(t)
	if i0.Name != "kaio fake device 0" || i0.CCMajor != 9 || i0.CCMinor != 0 || i0.SMCount != 4 ||
		i0.TotalMemory != 1<<30 || i0.L2CacheBytes != 1<<20 || i0.Ordinal != 0 {
		t.Fatalf("%+v", i0)
	}
	if must(d1.Info()).get(t).Name != "kaio fake device 1" || d0.NativeContext() == nil || d0.NativeContext() == d1.NativeContext() {
		t.Fatal("device 1")
	}
}

func TestErrorsCarryExactStatusAndMessage(t *testing.T) {
	needFake(t)
	d0, d1 := open2(t)
	s0 := must(d0.NewStream(kaio.StreamDefault)).get(t)
	s1 := must(d1.NewStream(kaio.StreamDefault)).get(t)
	defer s0.Close()
	defer s1.Close()

	_, err := kaio.OpenDevice(99)
	ke := expectErr(t, err, kaio.StatusNoDevice, "kaio_device_open", "'ordinal'", "99", "2 device")
	if !errors.Is(err, kaio.ErrNoDevice) || errors.Is(err, kaio.ErrOutOfBounds) || ke.DriverCode != 0 {
		t.Error("errors.Is")
	}
	if !strings.HasPrefix(err.Error(), "KAIO_ERROR_NO_DEVICE: kaio_device_open") {
		t.Error(err)
	}
	_, err = d0.NewSiluGateOp(kaio.DTypeF32, 0, 4)
	expectErr(t, err, kaio.StatusInvalidDimension, "kaio_op_create_silu_gate", "0 x 4")
	_, err = d0.NewSoftmaxOp(kaio.DTypeF32, 4, -5)
	expectErr(t, err, kaio.StatusInvalidDimension, "kaio_op_create_softmax", "-5")
	_, err = d0.NewBuffer(0)
	expectErr(t, err, kaio.StatusInvalidDimension, "kaio_buffer_create", "'size_bytes'")
	_, err = d0.NewSiluGateOp(kaio.DTypeI8, 4, 4)
	expectErr(t, err, kaio.StatusInvalidDType, "'dtype'", "i8")
	_, err = d0.NewRMSNormOp(kaio.DTypeF32, 4, 4, float32(math.NaN()))
	expectErr(t, err, kaio.StatusInvalidArgument, "'eps'", "nan")
	_, err = d0.NewGeluOp(kaio.DTypeF32, 4, 4, 9)
	expectErr(t, err, kaio.StatusInvalidArgument, "kaio_op_create_gelu", "'mode'", "9")

	x0 := must(d0.NewBuffer(4096)).get(t)
	small0 := must(d0.NewBuffer(256)).get(t)
	x1 := must(d1.NewBuffer(4096)).get(t)
	v := func(b *kaio.Buffer) kaio.Tensor { return kaio.View(b, kaio.DTypeF32, 8, 16) }
	// Objects of fake devices 0 and 1 mixed.
	expectErr(t, kaio.SiluGate(s0, v(x0), v(x1), v(x0)), kaio.StatusWrongDevice, "kaio_silu_gate", "'gate'", "device 1", "device 0")
	op := must(d0.NewSiluGateOp(kaio.DTypeF32, 8, 16)).get(t)
	defer op.Close()
	expectErr(t, op.Launch(s1, v(x0), v(x0), v(x0)), kaio.StatusWrongDevice, "kaio_op_launch", "device 0", "'stream'", "device 1")
	expectErr(t, x0.Memset(s1, 0, 0, 16), kaio.StatusWrongDevice, "kaio_buffer_memset", "device 0", "device 1")
	_, err = d0.WrapStream(s1.Native())
	expectErr(t, err, kaio.StatusWrongDevice, "kaio_stream_wrap", "'cu_stream'")
	_, err = d0.WrapBuffer(x1.DevicePtr(), 64)
	expectErr(t, err, kaio.StatusWrongDevice, "kaio_buffer_wrap", "device 0")
	// Views out of bounds, misaligned, strided where contiguous is needed.
	expectErr(t, op.Launch(s0, v(x0), v(x0), v(small0)), kaio.StatusOutOfBounds, "'out'", "512", "holds 256")
	expectErr(t, kaio.Softmax(s0, v(x0).WithOffset(900), v(x0)), kaio.StatusOutOfBounds, "kaio_softmax", "offset_bytes 3600")
	mis := v(x0)
	mis.OffsetBytes = 2
	expectErr(t, op.Launch(s0, mis, v(x0), v(x0)), kaio.StatusMisaligned, "'x'", "offset_bytes 2", "4-byte")
	expectErr(t, kaio.SiluGate(s0, v(x0).WithRowStride(20), v(x0), v(x0)), kaio.StatusUnsupported, "row_stride 20", "contiguous")
	expectErr(t, op.Launch(s0, v(x0), v(x0)), kaio.StatusInvalidArgument, "'count'", "{x, gate, out}")
	expectErr(t, op.Launch(s0), kaio.StatusInvalidArgument, "kaio_op_launch")
	expectErr(t, kaio.Gelu(s0, kaio.View(x0, kaio.DTypeI32, 8, 16), v(x0), kaio.GeluTanh), kaio.StatusInvalidDType, "kaio_gelu", "i32")
	expectErr(t, kaio.RMSNorm(s0, kaio.Tensor{}, kaio.Tensor{}, kaio.Tensor{}, 1e-5), kaio.StatusInvalidHandle, "kaio_rmsnorm", "'x'")
	expectErr(t, x0.Write(4090, make([]byte, 16)), kaio.StatusOutOfBounds, "kaio_buffer_write", "4096-byte")
	expectErr(t, x0.CopyFrom(8, x0, 0, 64, s0), kaio.StatusInvalidArgument, "kaio_buffer_copy", "overlap")
	_, err = d0.NewBuffer(1 << 40)
	expectErr(t, err, kaio.StatusOutOfDeviceMemory, "out of device memory")
	for _, b := range []*kaio.Buffer{x0, small0, x1} {
		ok(t, b.Close())
	}
}

// Goroutines move between OS threads, and libkaio's last error is per OS
// thread: each error must still carry its own call's message.
func TestErrorsStayWithTheirCall(t *testing.T) {
	needFake(t)
	d0, _ := open2(t)
	var wg sync.WaitGroup
	fail := make(chan string, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				ordinal := 100 + g*1000 + i
				_, err := kaio.OpenDevice(ordinal)
				if err == nil || !strings.Contains(err.Error(), fmt.Sprint(ordinal)) {
					fail <- fmt.Sprintf("ordinal %d: %v", ordinal, err)
					return
				}
				runtime.Gosched()
				if _, err := d0.NewBuffer(0); !errors.Is(err, kaio.ErrInvalidDimension) {
					fail <- fmt.Sprint(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(fail)
	for f := range fail {
		t.Error(f)
	}
}

func TestBuffersRoundTrip(t *testing.T) {
	needFake(t)
	d0, d1 := open2(t)
	f := []float32{1.5, -2, 3.25, 1e-3, 7}
	b := must(d0.NewBuffer(uint64(4 * len(f)))).get(t)
	defer b.Close()
	ok(t, kaio.WriteSlice(b, 0, f))
	got := make([]float32, len(f))
	ok(t, kaio.ReadSlice(b, 0, got))
	for i := range f {
		if got[i] != f[i] {
			t.Fatal(got)
		}
	}
	part := make([]float32, 2)
	ok(t, kaio.ReadSlice(b, 2, part))
	if part[0] != 3.25 || part[1] != 1e-3 {
		t.Fatal(part)
	}
	roundTrip := func(name string, data []byte) {
		b := must(d1.NewBuffer(uint64(len(data)))).get(t)
		defer b.Close()
		ok(t, b.Write(0, data))
		back := make([]byte, len(data))
		ok(t, b.Read(0, back))
		if !bytes.Equal(back, data) || b.Size() != uint64(len(data)) || b.DevicePtr()%256 != 0 {
			t.Fatal(name)
		}
	}
	roundTrip("f16", kaio.AsBytes([]kaio.F16{kaio.F16FromFloat32(0.5), kaio.F16FromFloat32(-3)}))
	roundTrip("bf16", kaio.AsBytes([]kaio.BF16{kaio.BF16FromFloat32(0.5), kaio.BF16FromFloat32(-3)}))
	roundTrip("i8", kaio.AsBytes([]int8{-128, 0, 127}))
	roundTrip("u8", kaio.AsBytes([]uint8{0, 255}))
	roundTrip("i32", kaio.AsBytes([]int32{math.MinInt32, -1, 42}))
	roundTrip("u32", kaio.AsBytes([]uint32{math.MaxUint32, 7}))

	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	a := must(d0.NewBuffer(256)).get(t)
	c := must(d0.NewBuffer(256)).get(t)
	ok(t, a.Memset(s, 0, 0xAB, 256))
	ok(t, a.Memset(s, 40, 0, 8))
	ok(t, c.Memset(s, 0, 0, 256))
	ok(t, c.CopyFrom(16, a, 32, 32, s))
	ok(t, s.Synchronize())
	u := make([]uint32, 64)
	ok(t, kaio.ReadSlice(c, 0, u))
	if u[3] != 0 || u[4] != 0xABABABAB || u[6] != 0 || u[7] != 0 || u[11] != 0xABABABAB || u[12] != 0 {
		t.Fatalf("%x", u[:16])
	}
	src := kaio.AsBytes([]uint32{1, 2, 3, 4})
	dst := make([]byte, 16)
	ok(t, a.WriteAsync(s, 0, src))
	ok(t, a.ReadAsync(s, 0, dst))
	ok(t, s.Synchronize())
	if !bytes.Equal(src, dst) {
		t.Fatal(dst)
	}
	// A wrapper over memory kaio did not allocate (a foreign pointer).
	w := must(d0.WrapBuffer(a.DevicePtr()+64, 128)).get(t)
	if !w.Foreign() || w.Size() != 128 || w.DevicePtr() != a.DevicePtr()+64 {
		t.Fatal("wrap")
	}
	ok(t, w.Write(0, []byte{1, 2, 3, 4}))
	ok(t, w.Close())
	back := make([]byte, 4)
	ok(t, a.Read(64, back))
	if !bytes.Equal(back, []byte{1, 2, 3, 4}) {
		t.Fatal(back)
	}
	_, err := d0.WrapBuffer(a.DevicePtr()+64, 4096)
	expectErr(t, err, kaio.StatusOutOfBounds, "kaio_buffer_wrap", "'size_bytes'")
	host := make([]byte, 64)
	_, err = d0.WrapBuffer(uint64(uintptr(unsafePointer(host))), 64)
	expectErr(t, err, kaio.StatusInvalidArgument, "not device memory")
	ok(t, a.Close())
	ok(t, c.Close())
}

func TestCloseIsIdempotentAndUseAfterCloseFails(t *testing.T) {
	needFake(t)
	d0, _ := open2(t)
	b := must(d0.NewBuffer(64)).get(t)
	ok(t, b.Close())
	ok(t, b.Close())
	if b.DevicePtr() != 0 || b.Size() != 0 {
		t.Fatal("closed buffer answers")
	}
	expectErr(t, b.Write(0, []byte{1}), kaio.StatusInvalidHandle, "kaio_buffer_write", "'buffer'")
	s := must(d0.NewStream(kaio.StreamDefault)).get(t)
	ok(t, s.Close())
	ok(t, s.Close())
	expectErr(t, s.Synchronize(), kaio.StatusInvalidHandle, "kaio_stream_synchronize")
	var nilDev *kaio.Device
	ok(t, nilDev.Close())
	_, err := nilDev.NewBuffer(16)
	expectErr(t, err, kaio.StatusInvalidHandle, "kaio_buffer_create", "'device'")
	// A child outlives its device handle.
	d, err := kaio.OpenDevice(0)
	ok(t, err)
	child := must(d.NewBuffer(64)).get(t)
	ok(t, d.Close())
	ok(t, child.Write(0, []byte{1, 2}))
	ok(t, child.Close())
}

func TestFinalizersFreeUnclosedHandles(t *testing.T) {
	h := needFake(t)
	d0, _ := open2(t)
	before := h.LiveAllocations()
	func() {
		for i := 0; i < 50; i++ {
			if _, err := d0.NewBuffer(1024); err != nil {
				t.Fatal(err)
			}
		}
	}()
	if h.LiveAllocations() < before+50 {
		t.Fatal("allocations not counted")
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.LiveAllocations() > before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if n := h.LiveAllocations(); n > before {
		t.Fatalf("%d buffers never finalized", n-before)
	}
}

func TestStreamsAndEvents(t *testing.T) {
	needFake(t)
	d0, _ := open2(t)
	a := must(d0.NewStream(kaio.StreamDefault)).get(t)
	b := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	legacy := must(d0.WrapStream(nil)).get(t)
	if legacy.Native() != nil || !legacy.Foreign() || a.Native() == nil {
		t.Fatal("streams")
	}
	w := must(d0.WrapStream(b.Native())).get(t)
	if w.Native() != b.Native() {
		t.Fatal("wrap")
	}
	ok(t, w.Close())
	ok(t, b.Synchronize())
	start := must(d0.NewEvent(true)).get(t)
	end := must(d0.NewEvent(true)).get(t)
	ok(t, start.Record(a))
	ok(t, end.Record(a))
	ok(t, b.WaitEvent(end))
	ok(t, end.Synchronize())
	if ms := must(kaio.ElapsedMs(start, end)).get(t); ms != 0.25 {
		t.Fatal(ms)
	}
	untimed := must(d0.NewEvent(false)).get(t)
	ok(t, untimed.Record(a))
	_, err := kaio.ElapsedMs(start, untimed)
	expectErr(t, err, kaio.StatusInvalidArgument, "kaio_event_elapsed_ms", "'end'", "KAIO_EVENT_DISABLE_TIMING")
	for _, c := range []interface{ Close() error }{a, b, legacy, start, end, untimed} {
		ok(t, c.Close())
	}
}

func TestEveryOpLaunchesOnTheFake(t *testing.T) {
	h := needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	const rows, cols = 3, 1000
	launched := func(what string, before uint64) {
		t.Helper()
		l, found := h.LastLaunch()
		if h.LaunchCount() <= before || !found || l.Name == "" || l.Grid[0] < 1 || l.Block[0] < 1 {
			t.Fatalf("%s did not launch: %+v", what, l)
		}
	}
	for _, dt := range []kaio.DType{kaio.DTypeF32, kaio.DTypeF16, kaio.DTypeBF16} {
		n := uint64(rows * cols * dt.Size())
		x, g, o := must(d0.NewBuffer(n)).get(t), must(d0.NewBuffer(n)).get(t), must(d0.NewBuffer(n)).get(t)
		w := must(d0.NewBuffer(uint64(cols * dt.Size()))).get(t)
		v := func(b *kaio.Buffer) kaio.Tensor { return kaio.View(b, dt, rows, cols) }
		wv := kaio.View(w, dt, 1, cols)
		c := h.LaunchCount()
		ok(t, kaio.SiluGate(s, v(x), v(g), v(o)))
		launched("silu_gate", c)
		for _, mode := range []kaio.GeluMode{kaio.GeluErf, kaio.GeluTanh} {
			c = h.LaunchCount()
			ok(t, kaio.Gelu(s, v(x), v(o), mode))
			launched("gelu", c)
			op := must(d0.NewGeluOp(dt, rows, cols, mode)).get(t)
			c = h.LaunchCount()
			ok(t, op.Launch(s, v(x), v(x))) // in place
			launched("gelu op", c)
			ok(t, op.Close())
		}
		c = h.LaunchCount()
		ok(t, kaio.RMSNorm(s, v(x), wv, v(o), 1e-5))
		launched("rmsnorm", c)
		c = h.LaunchCount()
		ok(t, kaio.Softmax(s, v(x), v(o)))
		launched("softmax", c)
		silu := must(d0.NewSiluGateOp(dt, rows, cols)).get(t)
		rms := must(d0.NewRMSNormOp(dt, rows, cols, 1e-6)).get(t)
		sm := must(d0.NewSoftmaxOp(dt, rows, cols)).get(t)
		c = h.LaunchCount()
		for i := 0; i < 3; i++ {
			ok(t, silu.Launch(s, v(x), v(g), v(o)))
			ok(t, rms.Launch(s, v(x), wv, v(o)))
			ok(t, sm.Launch(s, v(x), v(o)))
		}
		if h.LaunchCount() < c+9 {
			t.Fatal("prepared ops did not launch")
		}
		strided := func(b *kaio.Buffer) kaio.Tensor { return kaio.View(b, dt, 2, 400).WithRowStride(1000) }
		c = h.LaunchCount()
		ok(t, kaio.Softmax(s, strided(x), strided(o)))
		launched("strided softmax", c)
		for _, closer := range []interface{ Close() error }{x, g, o, w, silu, rms, sm} {
			ok(t, closer.Close())
		}
	}
	ok(t, s.Synchronize())
}

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

func readExamplePTX(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("KAIO_EXAMPLES_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "examples")
	}
	text, err := os.ReadFile(filepath.Join(dir, "dequant_i8.ptx"))
	if err != nil {
		t.Skipf("cannot read examples/dequant_i8.ptx (set KAIO_EXAMPLES_DIR): %v", err)
	}
	return string(text)
}

func TestModuleAndKernelWithPackedArgs(t *testing.T) {
	h := needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	m := must(d0.LoadPTX(readExamplePTX(t))).get(t)
	defer m.Close()
	k := must(m.Kernel("dequant_i8")).get(t)
	defer k.Close()
	attrs := must(k.Attributes()).get(t)
	if attrs.ParamBytes != 24 || attrs.Registers != 32 {
		t.Fatalf("%+v", attrs)
	}
	packed := must(d0.NewBuffer(400)).get(t)
	out := must(d0.NewBuffer(1600)).get(t)
	args := new(kaio.Args).Ptr(packed).Ptr(out).F32(0.5).U32(100)
	c := h.LaunchCount()
	ok(t, k.Launch(s, kaio.Linear(100, 64), args.Bytes()))
	l, _ := h.LastLaunch()
	if h.LaunchCount() != c+1 || l.Name != "dequant_i8" || l.Grid != [3]uint32{2, 1, 1} || l.Block != [3]uint32{64, 1, 1} {
		t.Fatalf("%+v", l)
	}
	le := binary.LittleEndian
	want := [][]byte{le.AppendUint64(nil, packed.DevicePtr()), le.AppendUint64(nil, out.DevicePtr()),
		le.AppendUint32(nil, math.Float32bits(0.5)), le.AppendUint32(nil, 100)}
	for i, w := range want {
		if got, err := h.Param(i, len(w)); err != nil || !bytes.Equal(got, w) {
			t.Errorf("param %d: % x (%v), want % x", i, got, err, w)
		}
	}
	mixed := must(must(d0.LoadPTX(".version 7.0\n.target sm_80\n.address_size 64\n" +
		".visible .entry mixed(.param .u8 a, .param .u32 b, .param .u16 c, .param .u64 d, .param .f32 e, .param .f16 f)\n{ ret; }\n")).get(t).Kernel("mixed")).get(t)
	margs := new(kaio.Args).U8(7).I32(-5).U16(0xBEEF).PtrAt(out, 12).F32(2.5).F16(kaio.F16FromFloat32(-1))
	if a := must(mixed.Attributes()).get(t); a.ParamBytes != margs.Len() {
		t.Fatalf("packed %d bytes, the driver says %d", margs.Len(), a.ParamBytes)
	}
	ok(t, mixed.Launch(s, kaio.LaunchConfig{Grid: [3]uint32{2, 3, 1}, Block: [3]uint32{16, 4, 2}, SharedBytes: 1024}, margs.Bytes()))
	if l, _ := h.LastLaunch(); l.Name != "mixed" || l.Shared != 1024 || l.Block != [3]uint32{16, 4, 2} {
		t.Fatalf("%+v", l)
	}
	if p, _ := h.Param(3, 8); le.Uint64(p) != out.DevicePtr()+12 {
		t.Error("PtrAt")
	}
	if p, _ := h.Param(5, 2); le.Uint16(p) != 0xBC00 {
		t.Error("F16 arg")
	}

	_, err := d0.LoadPTX("this is not ptx")
	ke := expectErr(t, err, kaio.StatusPTXJITFailed, "kaio_module_load_ptx", "JIT log", "fake JIT rejected")
	if ke.DriverCode == 0 {
		t.Error("driver code")
	}
	_, err = m.Kernel("no_such_kernel")
	expectErr(t, err, kaio.StatusKernelNotFound, "'name'", "no_such_kernel")
	expectErr(t, k.Launch(s, kaio.Linear(100, 64), make([]byte, 12)), kaio.StatusInvalidArgument, "'args_size'", "12", "24")
	expectErr(t, k.Launch(s, kaio.LaunchConfig{Block: [3]uint32{32}}, args.Bytes()), kaio.StatusInvalidDimension, "grid (0, 0, 0)", "x >= 1")
	ok(t, packed.Close())
	ok(t, out.Close())
}

// The "no driver" case needs a fresh process: libkaio loads the driver once.
func TestNoDriverInAFreshProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KAIO_GO_TEST_CHILD=nodriver", "LIBKAIO_CUDA_DRIVER="+missingDriver)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "nodriver child: ok") {
		t.Fatalf("child said:\n%s", out)
	}
}

func noDriverChild() int {
	fail := func(f string, a ...interface{}) int { fmt.Printf("nodriver child: "+f+"\n", a...); return 1 }
	if err := kaio.CheckVersion(); err != nil {
		return fail("version: %v", err)
	}
	p, err := kaio.Probe()
	if err != nil || p.DriverStatus != kaio.StatusDriverNotFound || p.DeviceCount != 0 || p.Usable() ||
		!strings.Contains(p.Message, "cannot open") || !strings.Contains(p.Message, missingDriver) {
		return fail("probe: %+v %v", p, err)
	}
	_, err1 := kaio.DeviceCount()
	_, err2 := kaio.OpenDevice(0)
	for _, err := range []error{err1, err2} {
		var ke *kaio.Error
		if !errors.As(err, &ke) || !errors.Is(err, kaio.ErrDriverNotFound) || ke.Status.Category() != -200 ||
			!strings.Contains(ke.Message, missingDriver) || !strings.Contains(ke.Message, "LIBKAIO_CUDA_DRIVER") {
			return fail("%v", err)
		}
	}
	fmt.Println("nodriver child: ok")
	return 0
}

func TestMatmulDefaultsAreLibkaios(t *testing.T) {
	d := kaio.DefaultMatmulDesc()
	if d.InDType != kaio.DTypeF16 || d.OutDType != kaio.DTypeF32 || d.TransA != kaio.TransN ||
		d.TransB != kaio.TransN || d.Variant != kaio.MatmulAuto || d.Alpha != 1 || d.Beta != 0 || d.M != 0 {
		t.Fatalf("%+v", d)
	}
	b := kaio.DefaultMatmulBackwardDesc()
	if b.InDType != kaio.DTypeF16 || b.GradDType != kaio.DTypeF16 || b.OutDType != kaio.DTypeF32 || b.Beta != 0 {
		t.Fatalf("%+v", b)
	}
}

func TestMatmulOnTheFake(t *testing.T) {
	h := needFake(t)
	d0, _ := open2(t)
	s := must(d0.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	const m, n, k = 16, 8, 32
	buf := func(dt kaio.DType, rows, cols int64) kaio.Tensor {
		b := must(d0.NewBuffer(uint64(rows * cols * int64(dt.Size())))).get(t)
		t.Cleanup(func() { b.Close() })
		return kaio.View(b, dt, rows, cols)
	}
	a, bt, b := buf(kaio.DTypeF16, m, k), buf(kaio.DTypeF16, n, k), buf(kaio.DTypeF16, k, n)
	a16, b16 := buf(kaio.DTypeBF16, m, k), buf(kaio.DTypeBF16, k, n)
	c, ch := buf(kaio.DTypeF32, m, n), buf(kaio.DTypeF16, m, n)
	desc := kaio.DefaultMatmulDesc()
	desc.TransB, desc.M, desc.N, desc.K, desc.Alpha, desc.Beta = kaio.TransT, m, n, k, 0.5, 1
	op := must(d0.NewMatmulOp(desc)).get(t)
	defer op.Close()
	c0 := h.LaunchCount()
	ok(t, op.Launch(s, a, bt, c))
	for _, v := range []kaio.MatmulVariant{kaio.MatmulAuto, kaio.MatmulSync, kaio.MatmulAsync} {
		d := kaio.DefaultMatmulDesc()
		d.TransB, d.OutDType, d.Variant = kaio.TransT, kaio.DTypeF16, v
		ok(t, kaio.Matmul(s, a, bt, ch, d))
	}
	for kind := kaio.MatmulTCF16; kind <= kaio.MatmulTCBF16Async; kind++ {
		x, y := a, b
		if kind >= kaio.MatmulTCBF16 {
			x, y = a16, b16
		}
		ok(t, kaio.MatmulTC(s, kind, x, y, c))
		top := must(d0.NewMatmulTCOp(kind, m, n, k)).get(t)
		ok(t, top.Launch(s, x, y, c))
		ok(t, top.Close())
	}
	if h.LaunchCount() < c0+12 {
		t.Fatalf("%d launches", h.LaunchCount()-c0)
	}
	dc, dc32 := buf(kaio.DTypeF16, m, n), buf(kaio.DTypeF32, m, n)
	da, db := buf(kaio.DTypeF32, m, k), buf(kaio.DTypeF32, k, n)
	c0 = h.LaunchCount()
	ok(t, kaio.MatmulTCBackward(s, dc, a, b, da, db))
	ok(t, kaio.MatmulTCBackward(s, dc, a, b, kaio.Tensor{}, db)) // dA skipped
	if h.LaunchCount() != c0+3 {
		t.Fatalf("backward: %d launches, want 2 + 1", h.LaunchCount()-c0)
	}
	bd := kaio.DefaultMatmulBackwardDesc()
	bd.GradDType, bd.M, bd.N, bd.K, bd.Beta = kaio.DTypeF32, m, n, k, 1
	bop := must(d0.NewMatmulBackwardOp(bd)).get(t)
	defer bop.Close()
	c0 = h.LaunchCount()
	ok(t, bop.Launch(s, dc32, a, b, da, kaio.Tensor{}))
	if h.LaunchCount() < c0+2 {
		t.Fatal("f32 dC is rounded, then dA")
	}
	ok(t, s.Synchronize())

	bad := desc
	bad.K = 12
	_, err := d0.NewMatmulOp(bad)
	expectErr(t, err, kaio.StatusInvalidDimension, "K is 12", "multiple of 8")
	bad = desc
	bad.InDType = kaio.DTypeF32
	_, err = d0.NewMatmulOp(bad)
	expectErr(t, err, kaio.StatusInvalidDType, "in_dtype", "f32")
	bad = desc
	bad.TransA = 2
	_, err = d0.NewMatmulOp(bad)
	expectErr(t, err, kaio.StatusInvalidArgument, "trans_a is 2")
	expectErr(t, op.Launch(s, kaio.View(a.Buffer, kaio.DTypeF16, k, m), bt, c), kaio.StatusShapeMismatch, "'A' is 32 x 16", "16 x 32")
	expectErr(t, kaio.MatmulTCBackward(s, dc32, a, b, da, kaio.Tensor{}), kaio.StatusUnsupported, "'dC' is f32")
}
