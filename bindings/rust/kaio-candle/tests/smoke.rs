//! Links candle and libkaio into one test binary and uses both on the CPU: no
//! GPU or driver is needed.

#[test]
fn libkaio_loads_and_matches_the_bindings() {
    let v = kaio_candle::libkaio_version();
    assert!(v.can_run(kaio::COMPILED_VERSION), "libkaio {} vs bindings {}", v, kaio::COMPILED_VERSION);
}

#[test]
fn candle_cpu_tensor() -> candle_core::Result<()> {
    let t = candle_core::Tensor::new(&[1f32, 2., 3.], &candle_core::Device::Cpu)?;
    assert_eq!(t.sum_all()?.to_scalar::<f32>()?, 6.);
    Ok(())
}
