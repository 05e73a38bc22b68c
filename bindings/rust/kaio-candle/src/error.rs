//! libkaio's errors as candle errors: the status name and libkaio's message,
//! which names the function, argument, value and fix.
use candle_core::Error;

/// Turns a `kaio::Result` into a `candle_core::Result`, prefixing the op.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) trait KaioResultExt<T> {
    fn kaio(self, op: &str) -> candle_core::Result<T>;
}

impl<T> KaioResultExt<T> for kaio::Result<T> {
    fn kaio(self, op: &str) -> candle_core::Result<T> {
        self.map_err(|e| to_candle(op, &e))
    }
}

/// `kaio-candle::<op>: <STATUS>: <message>`.
pub fn to_candle(op: &str, e: &kaio::Error) -> Error {
    Error::Msg(format!("kaio-candle::{op}: {}: {}", e.status().name(), e.message()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_libkaio_error_keeps_its_status_and_message() {
        // A real libkaio error: ordinal -1 is refused before any driver call.
        let e = kaio::Device::open(-1).unwrap_err();
        let c = to_candle("rmsnorm", &e).to_string();
        assert!(c.starts_with("kaio-candle::rmsnorm: "), "{c}");
        assert!(c.contains(e.status().name()) && c.contains(e.message()), "{c}");
        assert!(c.contains("kaio_device_open"), "{c}");
    }
}
