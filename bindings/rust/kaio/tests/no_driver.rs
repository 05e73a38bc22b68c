//! "No driver": its own test binary, hence its own process, because libkaio
//! loads the driver once per process. Needs neither a GPU nor the fake.
use kaio::{Device, Status};

const MISSING: &str = "/nonexistent/libcuda.so.1";

#[test]
fn a_missing_driver_is_reported_not_fatal() {
    // Before any kaio call in this process; this file holds one test only.
    std::env::set_var("LIBKAIO_CUDA_DRIVER", MISSING);

    // The library itself loads fine: the version check does not need a driver.
    kaio::check_version().unwrap();

    let p = kaio::probe().expect("probe never fails for a missing driver");
    assert_eq!(p.driver_status, Status::DRIVER_NOT_FOUND);
    assert_eq!(p.device_count, 0);
    assert_eq!(p.driver_version, 0);
    assert!(!p.usable());
    assert!(p.message.contains("cannot open") && p.message.contains(MISSING), "{}", p.message);

    for e in [kaio::device_count().unwrap_err(), Device::open(0).unwrap_err()] {
        assert_eq!(e.status(), Status::DRIVER_NOT_FOUND, "{}", e);
        assert_eq!(e.status().category(), Status(-200));
        assert!(e.message().contains(MISSING), "{}", e);
        assert!(e.message().contains("LIBKAIO_CUDA_DRIVER"), "{}", e);
        assert!(e.to_string().starts_with("KAIO_ERROR_DRIVER_NOT_FOUND: "), "{}", e);
    }
}
