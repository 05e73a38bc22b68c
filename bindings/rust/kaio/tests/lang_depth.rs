//! Expression depth through the safe crate (issue 24): each kind of chain at
//! the kernel language's limit (48 levels) compiles on a thread with a
//! 256 KiB stack, one level more and the issue's huge reproducers give
//! KERNEL_SOURCE naming the line:col where the limit is crossed, and the
//! thread returns normally instead of overflowing its stack. Needs no driver.
mod common;

use common::expect_err;
use kaio::Status;

const LIMIT: usize = 48;
const STACK: usize = 256 * 1024;
const F32: &str = "kernel k(x: tensor<f32>, out: tensor<f32>) { ";

/// Runs `kaio::compile_ptx(src)` on a fresh thread with a 256 KiB stack
/// (std rounds up to the platform minimum; glibc puts the thread's TLS in
/// it too). A stack overflow would abort the whole test binary.
fn compile_small(src: String) -> kaio::Result<String> {
    std::thread::Builder::new()
        .name("lang-depth-256k".into())
        .stack_size(STACK)
        .spawn(move || kaio::compile_ptx(&src))
        .expect("spawn a 256 KiB thread")
        .join()
        .expect("the compiling thread returns normally")
}

/// `term op term op ... term`: n terms, depth n.
fn chain(term: &str, op: &str, n: usize) -> String {
    let mut out = String::from(term);
    for _ in 1..n {
        out.push_str(&format!(" {} {}", op, term));
    }
    out
}

/// 1-based column of the n-th (1-based) `needle` in a one-line source.
fn col_of(s: &str, needle: &str, n: usize) -> usize {
    s.match_indices(needle).nth(n - 1).expect("needle occurs n times").0 + 1
}

struct Case {
    name: &'static str,
    source: fn(usize) -> String,
    /// where depth LIMIT + 1 is reported: the n-th occurrence of `needle`
    needle: &'static str,
    occurrence: usize,
}

fn sum(d: usize) -> String {
    format!("{}out = {}; }}", F32, chain("x", "+", d))
}
fn product(d: usize) -> String {
    format!("{}out = {}; }}", F32, chain("x", "*", d))
}
fn casts(d: usize) -> String {
    format!("{}out = x{}; }}", F32, " as f32".repeat(d - 1))
}
/// `(x + ... + x) < x`: a comparison over a sum of depth d - 1
fn less(d: usize) -> String {
    format!("{}let c = {} < x; out = if c {{ x }} else {{ 0.0 }}; }}", F32, chain("x", "+", d - 1))
}
/// `x > 0.0 && x > 0.0 && ...`: d - 1 comparisons, depth d
fn and(d: usize) -> String {
    format!("{}let c = {}; out = if c {{ x }} else {{ 0.0 }}; }}", F32, chain("x > 0.0", "&&", d - 1))
}

fn cases() -> Vec<Case> {
    vec![
        Case { name: "+", source: sum, needle: "+", occurrence: LIMIT },
        Case { name: "*", source: product, needle: "*", occurrence: LIMIT },
        Case { name: "as", source: casts, needle: "as f32", occurrence: LIMIT },
        // the first two '<' are tensor<f32>'s
        Case { name: "<", source: less, needle: "<", occurrence: 3 },
        Case { name: "&&", source: and, needle: "&&", occurrence: LIMIT - 1 },
    ]
}

fn depth_error(col: usize) -> String {
    format!("kaio_lang_compile_ptx: 1:{}: expression deeper than 48 levels", col)
}

#[test]
fn chains_at_the_limit_compile_on_a_256_kib_stack_and_one_more_is_rejected() {
    for c in cases() {
        let ptx = compile_small((c.source)(LIMIT)).unwrap_or_else(|e| panic!("{} at the limit: {}", c.name, e));
        assert!(ptx.contains(".entry"), "{}: {}", c.name, ptx);

        let past = (c.source)(LIMIT + 1);
        let want = depth_error(col_of(&past, c.needle, c.occurrence));
        let e = expect_err(compile_small(past), Status::KERNEL_SOURCE, &[&want]);
        assert!(e.message().starts_with(&want), "{}: {}", c.name, e.message());
    }
}

#[test]
fn the_issues_reproducers_are_rejected_on_a_256_kib_stack() {
    // 21,820 terms overflowed an 8 MiB stack before the limit existed
    let src = sum(21_820);
    let want = depth_error(col_of(&src, "+", LIMIT));
    expect_err(compile_small(src), Status::KERNEL_SOURCE, &[&want]);

    let src = casts(100_000);
    let want = depth_error(col_of(&src, "as f32", LIMIT));
    expect_err(compile_small(src), Status::KERNEL_SOURCE, &[&want]);

    for (src, op) in [(product(21_820), "*"), (and(21_820), "&&")] {
        let want = depth_error(col_of(&src, op, if op == "&&" { LIMIT - 1 } else { LIMIT }));
        expect_err(compile_small(src), Status::KERNEL_SOURCE, &[&want]);
    }
    let src = less(21_820);
    let want = depth_error(col_of(&src, "+", LIMIT));
    expect_err(compile_small(src), Status::KERNEL_SOURCE, &[&want]);
}
