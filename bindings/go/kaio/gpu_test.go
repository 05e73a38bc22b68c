package kaio_test

// GPU tests: every wrapped op in f32, f16 and bf16 against an f64 CPU
// reference from the same rounded inputs, a user PTX kernel checked exactly,
// and copies, events and wrapped (foreign) memory and streams. They run only
// on a real device (LIBKAIO_CUDA_DRIVER unset or naming a real driver) and
// skip, saying why, elsewhere. Build with `go test -c` and run the binary on
// the GPU machine from this directory (or set KAIO_EXAMPLES_DIR).
//
// Tolerance per element, as in tests/gpu_ops_test.cpp:
//   |out - ref| <= rtol·|ref| + atol, rtol = half an ulp of the output dtype
//   (f32 0, f16 2^-11, bf16 2^-8) + 4e-6 (+ 2^-22·sqrt(cols) for row ops),
//   atol = 2e-7·|x| for GELU + 6e-8 for f16.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"kaio.dev/kaio"
)

func gpuDevice(t *testing.T) *kaio.Device {
	t.Helper()
	p, err := kaio.Probe()
	if err != nil {
		t.Skipf("GPU test skipped: kaio.Probe failed: %v", err)
	}
	if p.DriverStatus != kaio.StatusOK {
		t.Skipf("GPU test skipped: no CUDA driver: %v: %s", p.DriverStatus, p.Message)
	}
	if p.DeviceCount < 1 {
		t.Skip("GPU test skipped: the CUDA driver reports no device")
	}
	d, err := kaio.OpenDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	info := must(d.Info()).get(t)
	if strings.HasPrefix(info.Name, "kaio fake") {
		t.Skip("GPU test skipped: running on the fake test driver (LIBKAIO_CUDA_DRIVER is set)")
	}
	if info.CCMajor < 8 {
		t.Skipf("GPU test skipped: %s is sm_%d%d; built-in ops need 8.0+", info.Name, info.CCMajor, info.CCMinor)
	}
	return d
}

func testRand(t *testing.T) *rand.Rand {
	seed := time.Now().UnixNano()
	if s, err := strconv.ParseInt(os.Getenv("KAIO_TEST_SEED"), 10, 64); err == nil {
		seed = s
	}
	t.Logf("KAIO_TEST_SEED=%d", seed)
	return rand.New(rand.NewSource(seed))
}

// encode stores vals as dt and returns the exact stored values.
func encode(dt kaio.DType, vals []float64) ([]byte, []float64) {
	b := make([]byte, 0, len(vals)*dt.Size())
	exact := make([]float64, len(vals))
	le := binary.LittleEndian
	for i, v := range vals {
		switch dt {
		case kaio.DTypeF32:
			b = le.AppendUint32(b, math.Float32bits(float32(v)))
			exact[i] = float64(float32(v))
		case kaio.DTypeF16:
			h := kaio.F16FromFloat32(float32(v))
			b = le.AppendUint16(b, uint16(h))
			exact[i] = float64(h.Float32())
		case kaio.DTypeBF16:
			h := kaio.BF16FromFloat32(float32(v))
			b = le.AppendUint16(b, uint16(h))
			exact[i] = float64(h.Float32())
		}
	}
	return b, exact
}

func decode(dt kaio.DType, b []byte) []float64 {
	le := binary.LittleEndian
	out := make([]float64, len(b)/dt.Size())
	for i := range out {
		switch dt {
		case kaio.DTypeF32:
			out[i] = float64(math.Float32frombits(le.Uint32(b[4*i:])))
		case kaio.DTypeF16:
			out[i] = float64(kaio.F16(le.Uint16(b[2*i:])).Float32())
		case kaio.DTypeBF16:
			out[i] = float64(kaio.BF16(le.Uint16(b[2*i:])).Float32())
		}
	}
	return out
}

type opKind int

const (
	kSiluGate opKind = iota
	kGeluErf
	kGeluTanh
	kRMSNorm
	kSoftmax
)

func (k opKind) String() string {
	return [...]string{"silu_gate", "gelu_erf", "gelu_tanh", "rmsnorm", "softmax"}[k]
}
func (k opKind) row() bool { return k == kRMSNorm || k == kSoftmax }

type layout struct {
	offset, inPad, outPad int64
	inPlace, prepared     bool
}

const eps = 1e-5

func reference(k opKind, rows, cols, xs int64, x, g, w []float64) []float64 {
	out := make([]float64, rows*cols)
	for r := int64(0); r < rows; r++ {
		xr := x[r*xs : r*xs+cols]
		o := out[r*cols : (r+1)*cols]
		switch k {
		case kSiluGate:
			for c := range o {
				o[c] = xr[c] / (1 + math.Exp(-xr[c])) * g[r*xs+int64(c)]
			}
		case kGeluErf:
			for c := range o {
				o[c] = 0.5 * xr[c] * (1 + math.Erf(xr[c]/math.Sqrt2))
			}
		case kGeluTanh:
			kk := math.Sqrt(2 / math.Pi)
			for c := range o {
				v := xr[c]
				o[c] = 0.5 * v * (1 + math.Tanh(kk*(v+0.044715*v*v*v)))
			}
		case kRMSNorm:
			ss := 0.0
			for _, v := range xr {
				ss += v * v
			}
			inv := 1 / math.Sqrt(ss/float64(cols)+float64(float32(eps)))
			for c := range o {
				o[c] = xr[c] * inv * w[c]
			}
		case kSoftmax:
			m := math.Inf(-1)
			for _, v := range xr {
				m = math.Max(m, v)
			}
			sum := 0.0
			for _, v := range xr {
				sum += math.Exp(v - m)
			}
			for c := range o {
				o[c] = math.Exp(xr[c]-m) / sum
			}
		}
	}
	return out
}

func runCase(t *testing.T, d *kaio.Device, s *kaio.Stream, rng *rand.Rand, k opKind, dt kaio.DType, rows, cols int64, l layout) {
	xs, ors := cols, cols
	if k.row() {
		xs, ors = cols+l.inPad, cols+l.outPad
	}
	lo, hi := -8.0, 8.0
	if k == kSoftmax {
		lo, hi = -10, 10
	} else if k == kRMSNorm {
		lo, hi = -3, 3
	}
	nIn, nOut := l.offset+rows*xs, l.offset+rows*ors
	gen := func(n int64, lo, hi float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = lo + (hi-lo)*rng.Float64()
		}
		return v
	}
	xb, xe := encode(dt, gen(nIn, lo, hi))
	gb, ge := encode(dt, gen(nIn, -4, 4))
	wb, we := encode(dt, gen(cols, -2, 2))
	upload := func(b []byte) *kaio.Buffer {
		buf := must(d.NewBuffer(uint64(len(b)))).get(t)
		ok(t, buf.Write(0, b))
		t.Cleanup(func() { buf.Close() })
		return buf
	}
	bx, bg, bw := upload(xb), upload(gb), upload(wb)
	bo := must(d.NewBuffer(uint64(nOut) * uint64(dt.Size()))).get(t)
	defer bo.Close()
	ok(t, bo.Memset(s, 0, 0xFF, bo.Size())) // NaN poison

	view := func(b *kaio.Buffer, rows, cols, stride, off int64) kaio.Tensor {
		return kaio.View(b, dt, rows, cols).WithOffset(off).WithRowStride(stride)
	}
	x, g, w := view(bx, rows, cols, xs, l.offset), view(bg, rows, cols, xs, l.offset), view(bw, 1, cols, cols, 0)
	outBuf := bo
	if l.inPlace {
		outBuf = bx
	}
	out := view(outBuf, rows, cols, ors, l.offset)
	what := fmt.Sprintf("%v %v %dx%d %+v", k, dt, rows, cols, l)

	var err error
	if l.prepared {
		var op *kaio.Op
		switch k {
		case kSiluGate:
			op = must(d.NewSiluGateOp(dt, rows, cols)).get(t)
			err = op.Launch(s, x, g, out)
		case kGeluErf, kGeluTanh:
			mode := kaio.GeluErf
			if k == kGeluTanh {
				mode = kaio.GeluTanh
			}
			op = must(d.NewGeluOp(dt, rows, cols, mode)).get(t)
			err = op.Launch(s, x, out)
		case kRMSNorm:
			op = must(d.NewRMSNormOp(dt, rows, cols, eps)).get(t)
			err = op.Launch(s, x, w, out)
		case kSoftmax:
			op = must(d.NewSoftmaxOp(dt, rows, cols)).get(t)
			err = op.Launch(s, x, out)
		}
		defer op.Close()
	} else {
		switch k {
		case kSiluGate:
			err = kaio.SiluGate(s, x, g, out)
		case kGeluErf:
			err = kaio.Gelu(s, x, out, kaio.GeluErf)
		case kGeluTanh:
			err = kaio.Gelu(s, x, out, kaio.GeluTanh)
		case kRMSNorm:
			err = kaio.RMSNorm(s, x, w, out, eps)
		case kSoftmax:
			err = kaio.Softmax(s, x, out)
		}
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	ok(t, s.Synchronize())
	gotBytes := make([]byte, outBuf.Size())
	ok(t, outBuf.Read(0, gotBytes))
	got := decode(dt, gotBytes)
	want := reference(k, rows, cols, xs, xe[l.offset:], ge[l.offset:], we)
	halfUlp := map[kaio.DType]float64{kaio.DTypeF32: 0, kaio.DTypeF16: math.Ldexp(1, -11), kaio.DTypeBF16: math.Ldexp(1, -8)}[dt]
	math_ := 4e-6
	if k.row() {
		math_ += math.Ldexp(1, -22) * math.Sqrt(float64(cols))
	}
	bad := 0
	for r := int64(0); r < rows; r++ {
		for c := int64(0); c < cols; c++ {
			o, ref, xv := got[l.offset+r*ors+c], want[r*cols+c], xe[l.offset+r*xs+c]
			atol := 1e-30
			if dt == kaio.DTypeF16 {
				atol = 6e-8
			}
			if k == kGeluErf || k == kGeluTanh {
				atol += 2e-7 * math.Abs(xv)
			}
			tol := (halfUlp+math_)*math.Abs(ref) + atol
			if !(math.Abs(o-ref) <= tol) {
				if bad < 5 {
					t.Errorf("%s: [%d,%d] got %g want %g (x = %g, tol %g)", what, r, c, o, ref, xv, tol)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d elements outside tolerance", what, bad)
	}
	if !l.inPlace { // nothing written outside the output view
		for i := int64(0); i < nOut; i++ {
			j := i - l.offset
			if j >= 0 && j%ors < cols && j/ors < rows {
				continue
			}
			for _, b := range gotBytes[i*int64(dt.Size()) : (i+1)*int64(dt.Size())] {
				if b != 0xFF {
					t.Fatalf("%s: element %d outside the view was written", what, i)
				}
			}
		}
	}
}

func runOp(t *testing.T, k opKind, shapes [][2]int64) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	layouts := []layout{{}, {prepared: true}, {offset: 1}}
	if k.row() {
		layouts = append(layouts, layout{inPad: 3, outPad: 5}, layout{offset: 1, inPad: 8, outPad: 1, prepared: true})
	} else {
		layouts = append(layouts, layout{inPlace: true}, layout{inPlace: true, prepared: true, offset: 1})
	}
	for _, dt := range []kaio.DType{kaio.DTypeF32, kaio.DTypeF16, kaio.DTypeBF16} {
		for _, sh := range shapes {
			for _, l := range layouts {
				runCase(t, d, s, rng, k, dt, sh[0], sh[1], l)
			}
		}
	}
}

var elementwiseShapes = [][2]int64{{1, 1}, {7, 13}, {33, 1000}, {4, 65536 + 3}}
var rowShapes = [][2]int64{{1, 1}, {5, 7}, {64, 1024}, {3, 8191}, {2, 50000}, {300, 32}}

func TestGPUSiluGate(t *testing.T) { runOp(t, kSiluGate, elementwiseShapes) }
func TestGPUGeluErf(t *testing.T)  { runOp(t, kGeluErf, elementwiseShapes) }
func TestGPUGeluTanh(t *testing.T) { runOp(t, kGeluTanh, elementwiseShapes) }
func TestGPURMSNorm(t *testing.T)  { runOp(t, kRMSNorm, rowShapes) }
func TestGPUSoftmax(t *testing.T)  { runOp(t, kSoftmax, rowShapes) }

func TestGPUUserPTXKernelExact(t *testing.T) {
	d := gpuDevice(t)
	ptx := readExamplePTX(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	m := must(d.LoadPTX(ptx)).get(t)
	defer m.Close()
	k := must(m.Kernel("dequant_i8")).get(t)
	defer k.Close()
	const nWords, guard = 100003, 64
	packed := make([]uint32, nWords)
	seed := uint32(12345)
	for i := range packed {
		seed = seed*1664525 + 1013904223
		packed[i] = seed
	}
	bp := must(d.NewBuffer(4 * nWords)).get(t)
	defer bp.Close()
	bo := must(d.NewBuffer(4 * (4*nWords + guard))).get(t)
	defer bo.Close()
	ok(t, kaio.WriteSlice(bp, 0, packed))
	ok(t, bo.Memset(s, 0, 0xFF, bo.Size()))
	const scale = float32(0.0078125)
	args := new(kaio.Args).Ptr(bp).Ptr(bo).F32(scale).U32(nWords)
	ok(t, k.Launch(s, kaio.Linear(nWords, 256), args.Bytes()))
	ok(t, s.Synchronize())
	out := make([]float32, 4*nWords+guard)
	ok(t, kaio.ReadSlice(bo, 0, out))
	for i, w := range packed {
		for j := 0; j < 4; j++ {
			want := float32(int8(w>>(8*j))) * scale
			if math.Float32bits(out[4*i+j]) != math.Float32bits(want) {
				t.Fatalf("out[%d] = %g, want %g", 4*i+j, out[4*i+j], want)
			}
		}
	}
	for _, v := range out[4*nWords:] {
		if math.Float32bits(v) != 0xFFFFFFFF {
			t.Fatal("the kernel wrote past the output")
		}
	}
}

func TestGPUCopiesEventsAndForeignHandles(t *testing.T) {
	d := gpuDevice(t)
	a := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	b := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer a.Close()
	defer b.Close()
	const n = 1 << 20
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i)
	}
	x := must(d.NewBuffer(4 * n)).get(t)
	y := must(d.NewBuffer(4 * n)).get(t)
	defer x.Close()
	defer y.Close()
	start, done := must(d.NewEvent(true)).get(t), must(d.NewEvent(true)).get(t)
	defer start.Close()
	defer done.Close()
	ok(t, start.Record(a))
	ok(t, x.WriteAsync(a, 0, kaio.AsBytes(src)))
	ok(t, done.Record(a))
	ok(t, b.WaitEvent(done))
	ok(t, y.CopyFrom(0, x, 0, 4*n, b))
	ok(t, y.Memset(b, 4*(n-16), 0, 64))
	back := make([]float32, n)
	ok(t, y.ReadAsync(b, 0, kaio.AsBytes(back)))
	ok(t, b.Synchronize())
	for i := 0; i < n; i++ {
		want := src[i]
		if i >= n-16 {
			want = 0
		}
		if back[i] != want {
			t.Fatalf("back[%d] = %g", i, back[i])
		}
	}
	if ms := must(kaio.ElapsedMs(start, done)).get(t); ms < 0 {
		t.Fatal(ms)
	}
	fs := must(d.WrapStream(a.Native())).get(t)
	fx := must(d.WrapBuffer(x.DevicePtr(), 4*4096)).get(t)
	out := must(d.NewBuffer(4 * 4096)).get(t)
	defer out.Close()
	ok(t, kaio.Softmax(fs, kaio.View(fx, kaio.DTypeF32, 4, 1024), kaio.View(out, kaio.DTypeF32, 4, 1024)))
	ok(t, fs.Synchronize())
	probs := make([]float32, 4096)
	ok(t, kaio.ReadSlice(out, 0, probs))
	for r := 0; r < 4; r++ {
		sum := 0.0
		for _, p := range probs[r*1024 : (r+1)*1024] {
			sum += float64(p)
		}
		if math.Abs(sum-1) > 1e-4 {
			t.Fatalf("row %d sums to %g", r, sum)
		}
	}
	ok(t, fx.Close())
	ok(t, fs.Close())
	ok(t, a.Synchronize()) // the wrapped CUstream still works
}

// ---- matmul: relative Frobenius error <= 1e-4 + half an ulp of the output
// dtype, as tests/gpu_matmul_test.cpp; NaN anywhere fails.

type mat struct {
	buf        *kaio.Buffer
	vals       []float64
	dt         kaio.DType
	rows, cols int64
	ld         int64
}

func newMat(t *testing.T, d *kaio.Device, s *kaio.Stream, rng *rand.Rand, dt kaio.DType, rows, cols, ld int64, poison bool) *mat {
	n := (rows-1)*ld + cols
	m := &mat{dt: dt, rows: rows, cols: cols, ld: ld, buf: must(d.NewBuffer(uint64(n) * uint64(dt.Size()))).get(t)}
	t.Cleanup(func() { m.buf.Close() })
	if poison {
		ok(t, m.buf.Memset(s, 0, 0xFF, m.buf.Size()))
		return m
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = 2*rng.Float64() - 1
	}
	var b []byte
	b, m.vals = encode(dt, v)
	ok(t, m.buf.Write(0, b))
	return m
}

func (m *mat) view() kaio.Tensor {
	return kaio.View(m.buf, m.dt, m.rows, m.cols).WithRowStride(m.ld)
}
func (m *mat) at(r, c int64) float64 { return m.vals[r*m.ld+c] }
func (m *mat) read(t *testing.T) []float64 {
	b := make([]byte, m.buf.Size())
	ok(t, m.buf.Read(0, b))
	return decode(m.dt, b)
}

func frobenius(t *testing.T, what string, rows, cols int64, got []float64, ld int64, out kaio.DType, want func(r, c int64) float64) {
	t.Helper()
	var err2, ref2 float64
	bad := 0
	for r := int64(0); r < rows; r++ {
		for c := int64(0); c < cols; c++ {
			g, w := got[r*ld+c], want(r, c)
			if math.IsNaN(g) || math.IsInf(g, 0) {
				bad++
			}
			err2 += (g - w) * (g - w)
			ref2 += w * w
		}
	}
	tol := 1e-4
	if out == kaio.DTypeF16 {
		tol += math.Ldexp(1, -11)
	} else if out == kaio.DTypeBF16 {
		tol += math.Ldexp(1, -8)
	}
	rel := math.Sqrt(err2 / math.Max(ref2, 1e-300))
	if bad > 0 || !(rel <= tol) {
		t.Fatalf("%s: %d outputs not finite, relative Frobenius error %.3e (tolerance %.3e)", what, bad, rel, tol)
	}
}

func up8(v int64) int64 { return (v + 7) / 8 * 8 }

func TestGPUMatmul(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	run := func(desc kaio.MatmulDesc, m, n, k, pad int64, prepared bool) {
		ar, ac, br, bc := m, k, k, n
		if desc.TransA == kaio.TransT {
			ar, ac = k, m
		}
		if desc.TransB == kaio.TransT {
			br, bc = n, k
		}
		a := newMat(t, d, s, rng, desc.InDType, ar, ac, up8(ac)+pad, false)
		b := newMat(t, d, s, rng, desc.InDType, br, bc, up8(bc)+pad, false)
		c := newMat(t, d, s, rng, desc.OutDType, m, n, n+pad, desc.Beta == 0)
		what := fmt.Sprintf("%+v %dx%dx%d pad %d prepared %v", desc, m, n, k, pad, prepared)
		var err error
		if prepared {
			pd := desc
			pd.M, pd.N, pd.K = m, n, k
			op := must(d.NewMatmulOp(pd)).get(t)
			err = op.Launch(s, a.view(), b.view(), c.view())
			op.Close()
		} else {
			err = kaio.Matmul(s, a.view(), b.view(), c.view(), desc)
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		ok(t, s.Synchronize())
		opa := func(r, x int64) float64 {
			if desc.TransA == kaio.TransT {
				return a.at(x, r)
			}
			return a.at(r, x)
		}
		opb := func(x, col int64) float64 {
			if desc.TransB == kaio.TransT {
				return b.at(col, x)
			}
			return b.at(x, col)
		}
		frobenius(t, what, m, n, c.read(t), c.ld, desc.OutDType, func(r, col int64) float64 {
			acc := 0.0
			for x := int64(0); x < k; x++ {
				acc += opa(r, x) * opb(x, col)
			}
			if desc.Beta != 0 {
				return float64(desc.Alpha)*acc + float64(desc.Beta)*c.at(r, col)
			}
			return float64(desc.Alpha) * acc
		})
	}
	for _, in := range []kaio.DType{kaio.DTypeF16, kaio.DTypeBF16} {
		for _, tr := range [][2]kaio.Trans{{kaio.TransN, kaio.TransN}, {kaio.TransN, kaio.TransT}, {kaio.TransT, kaio.TransN}, {kaio.TransT, kaio.TransT}} {
			for _, sh := range [][3]int64{{1, 1, 8}, {7, 13, 24}, {64, 72, 128}, {129, 127, 264}} {
				desc := kaio.DefaultMatmulDesc()
				desc.InDType, desc.TransA, desc.TransB = in, tr[0], tr[1]
				run(desc, sh[0], sh[1], sh[2], 0, false)
			}
		}
		for _, out := range []kaio.DType{kaio.DTypeF32, kaio.DTypeF16, kaio.DTypeBF16} {
			for _, v := range []kaio.MatmulVariant{kaio.MatmulAuto, kaio.MatmulSync, kaio.MatmulAsync} {
				desc := kaio.DefaultMatmulDesc()
				desc.InDType, desc.OutDType, desc.Variant, desc.TransB, desc.Alpha, desc.Beta = in, out, v, kaio.TransT, 0.5, 2
				run(desc, 33, 40, 64, 8, true)
			}
		}
	}
	// KAIO's fixed entry points.
	for kind := kaio.MatmulTCF16; kind <= kaio.MatmulTCBF16Async; kind++ {
		dt := kaio.DTypeF16
		if kind >= kaio.MatmulTCBF16 {
			dt = kaio.DTypeBF16
		}
		const m, n, k = 33, 40, 64
		a := newMat(t, d, s, rng, dt, m, k, k, false)
		b := newMat(t, d, s, rng, dt, k, n, n, false)
		c := newMat(t, d, s, rng, kaio.DTypeF32, m, n, n, true)
		ok(t, kaio.MatmulTC(s, kind, a.view(), b.view(), c.view()))
		ok(t, s.Synchronize())
		frobenius(t, fmt.Sprintf("MatmulTC %d", kind), m, n, c.read(t), n, kaio.DTypeF32, func(r, col int64) float64 {
			acc := 0.0
			for x := int64(0); x < k; x++ {
				acc += a.at(r, x) * b.at(x, col)
			}
			return acc
		})
	}
}

func TestGPUMatmulBackward(t *testing.T) {
	d := gpuDevice(t)
	s := must(d.NewStream(kaio.StreamNonBlocking)).get(t)
	defer s.Close()
	rng := testRand(t)
	const m, n, k = 24, 40, 72
	for _, in := range []kaio.DType{kaio.DTypeF16, kaio.DTypeBF16} {
		for _, grad := range []kaio.DType{in, kaio.DTypeF32} {
			for _, beta := range []float32{0, 1} {
				a := newMat(t, d, s, rng, in, m, k, k, false)
				b := newMat(t, d, s, rng, in, k, n, n, false)
				dc := newMat(t, d, s, rng, grad, m, n, n, false)
				da := newMat(t, d, s, rng, kaio.DTypeF32, m, k, k, beta == 0)
				db := newMat(t, d, s, rng, kaio.DTypeF32, k, n, n, beta == 0)
				desc := kaio.DefaultMatmulBackwardDesc()
				desc.InDType, desc.GradDType, desc.M, desc.N, desc.K, desc.Beta = in, grad, m, n, k, beta
				op := must(d.NewMatmulBackwardOp(desc)).get(t)
				ok(t, op.Launch(s, dc.view(), a.view(), b.view(), da.view(), db.view()))
				ok(t, s.Synchronize())
				op.Close()
				g := func(r, c int64) float64 { // an f32 dC is rounded to in first
					if grad == kaio.DTypeF32 {
						_, v := encode(in, []float64{dc.at(r, c)})
						return v[0]
					}
					return dc.at(r, c)
				}
				prior := func(x *mat, r, c int64) float64 {
					if beta == 0 {
						return 0
					}
					return float64(beta) * x.at(r, c)
				}
				what := fmt.Sprintf("%+v", desc)
				frobenius(t, what+" dA", m, k, da.read(t), k, kaio.DTypeF32, func(r, x int64) float64 {
					acc := prior(da, r, x)
					for c := int64(0); c < n; c++ {
						acc += g(r, c) * b.at(x, c)
					}
					return acc
				})
				frobenius(t, what+" dB", k, n, db.read(t), n, kaio.DTypeF32, func(x, c int64) float64 {
					acc := prior(db, x, c)
					for r := int64(0); r < m; r++ {
						acc += a.at(r, x) * g(r, c)
					}
					return acc
				})
			}
		}
	}
}
