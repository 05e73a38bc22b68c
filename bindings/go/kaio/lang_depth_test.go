package kaio_test

// Expression depth through the Go binding (issue 24): each kind of chain at
// the kernel language's limit (48 levels) compiles, one level more and the
// issue's huge reproducers give ErrKernelSource naming the line:col where
// the limit is crossed. Each compile runs on an OS thread with a 256 KiB C
// stack (internal/smallstack): cgo calls from Go code that a C thread
// called into run on that thread's own stack. Needs no driver.

import (
	"fmt"
	"strings"
	"testing"

	"kaio.dev/kaio"
	"kaio.dev/kaio/internal/smallstack"
)

const (
	depthLimit = 48
	smallStack = 256 * 1024
	depthF32   = "kernel k(x: tensor<f32>, out: tensor<f32>) { "
)

// compileSmall runs kaio.CompileLangPTX(src) on a 256 KiB stack and
// returns its result and how much of that stack was touched.
func compileSmall(t *testing.T, src string) (string, error, int) {
	t.Helper()
	var ptx string
	var err error
	used, rerr := smallstack.Run(smallStack, func() { ptx, err = kaio.CompileLangPTX(src) })
	if rerr != nil {
		t.Fatal(rerr)
	}
	if used >= smallStack*15/16 {
		t.Errorf("compiling used %d of %d bytes of stack", used, smallStack)
	}
	return ptx, err, used
}

// depthChain is term op term op ... term: n terms, depth n.
func depthChain(term, op string, n int) string {
	return term + strings.Repeat(" "+op+" "+term, n-1)
}

// colOf is the 1-based column of the n-th (1-based) needle in a one-line source.
func colOf(s, needle string, n int) int {
	at := -1
	for k := 0; k < n; k++ {
		i := strings.Index(s[at+1:], needle)
		if i < 0 {
			panic(fmt.Sprintf("%q occurs fewer than %d times", needle, n))
		}
		at += 1 + i
	}
	return at + 1
}

type depthCase struct {
	name       string
	source     func(d int) string
	needle     string
	occurrence int // where depth 49 is reported
}

func depthSum(d int) string     { return depthF32 + "out = " + depthChain("x", "+", d) + "; }" }
func depthProduct(d int) string { return depthF32 + "out = " + depthChain("x", "*", d) + "; }" }
func depthCasts(d int) string   { return depthF32 + "out = x" + strings.Repeat(" as f32", d-1) + "; }" }

// (x + ... + x) < x: a comparison over a sum of depth d - 1
func depthLess(d int) string {
	return depthF32 + "let c = " + depthChain("x", "+", d-1) + " < x; out = if c { x } else { 0.0 }; }"
}

// x > 0.0 && x > 0.0 && ...: d - 1 comparisons, depth d
func depthAnd(d int) string {
	return depthF32 + "let c = " + depthChain("x > 0.0", "&&", d-1) + "; out = if c { x } else { 0.0 }; }"
}

var depthCases = []depthCase{
	{"+", depthSum, "+", depthLimit},
	{"*", depthProduct, "*", depthLimit},
	{"as", depthCasts, "as f32", depthLimit},
	{"<", depthLess, "<", 3}, // the first two are tensor<f32>'s
	{"&&", depthAnd, "&&", depthLimit - 1},
}

func depthError(src, needle string, n int) string {
	return fmt.Sprintf("kaio_lang_compile_ptx: 1:%d: expression deeper than 48 levels", colOf(src, needle, n))
}

func TestLangDepthChainsAtTheLimitOnA256KiBStack(t *testing.T) {
	worst := 0
	for _, c := range depthCases {
		ptx, err, used := compileSmall(t, c.source(depthLimit))
		if err != nil || !strings.Contains(ptx, ".entry") {
			t.Errorf("%s at the limit: %v", c.name, err)
		}
		if used > worst {
			worst = used
		}
		past := c.source(depthLimit + 1)
		_, err, _ = compileSmall(t, past)
		ke := expectErr(t, err, kaio.StatusKernelSource, depthError(past, c.needle, c.occurrence))
		if !strings.HasPrefix(ke.Message, "kaio_lang_compile_ptx: 1:") {
			t.Errorf("%s: %s", c.name, ke.Message)
		}
	}
	// the compiles ran on the small stack: deeper trees used more of it
	idle, err := smallstack.Run(smallStack, func() {})
	if err != nil || worst < idle+16*1024 {
		t.Errorf("compiling touched %d bytes of the small stack, an empty call %d (%v)", worst, idle, err)
	}
	t.Logf("stack use: at most %d of %d bytes at the limit, %d for an empty call", worst, smallStack, idle)
}

func TestLangDepthTheIssuesReproducersOnA256KiBStack(t *testing.T) {
	for _, c := range []struct {
		src, needle string
		n           int
	}{
		{depthSum(21820), "+", depthLimit}, // overflowed an 8 MiB stack
		{depthCasts(100000), "as f32", depthLimit},
		{depthProduct(21820), "*", depthLimit},
		{depthLess(21820), "+", depthLimit},
		{depthAnd(21820), "&&", depthLimit - 1},
	} {
		_, err, _ := compileSmall(t, c.src)
		expectErr(t, err, kaio.StatusKernelSource, depthError(c.src, c.needle, c.n))
	}
}
