package kaio

// White-box: CompileLangPTX compiles each source once (list 6: it used to
// measure with one compile and copy with a second).

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCompileLangPTXCompilesEachSourceOnce(t *testing.T) {
	small := "kernel silu(x: tensor<f16>, out: tensor<f16>) {\n    out = x * sigmoid(x);\n}\n"
	var big strings.Builder
	big.WriteString("kernel k(x: tensor<f32>, out: tensor<f32>) {\n    let a0 = x;\n")
	for j := 1; j < 400; j++ {
		fmt.Fprintf(&big, "    let a%d = exp(a%d) * 0.5 + x / (x + 1.0);\n", j, j-1)
	}
	big.WriteString("    out = a399;\n}\n")
	for _, src := range []string{small, big.String()} {
		ptx, calls, err := compileLangPTX(src)
		if err != nil || !strings.Contains(ptx, ".entry") {
			t.Fatalf("%v: %s", err, ptx)
		}
		if calls != 1 {
			t.Errorf("%d compiles for %d bytes of PTX from %d of source", calls, len(ptx), len(src))
		}
	}
	// a rejected source: one compile, whose error is the one returned
	_, calls, err := compileLangPTX("kernel k(x: tensor<f32>, out: tensor<f32>) { out = x +; }")
	var ke *Error
	if calls != 1 || !errors.As(err, &ke) || ke.Status != StatusKernelSource ||
		!strings.HasPrefix(ke.Message, "kaio_lang_compile_ptx: 1:") {
		t.Errorf("%d compiles, %v", calls, err)
	}
}
