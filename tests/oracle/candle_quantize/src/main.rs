//! candle-core 0.11's `QTensor::quantize` on the CPU, as an oracle for
//! libkaio's k-quant tests (KAIO_QUANT_MODE_CANDLE).
//!
//!     candle_quantize FORMAT DTYPE IN OUT
//!
//! FORMAT: Q8_0, Q4K, Q5K or Q6K. DTYPE: f32, f16 or bf16, the element type
//! of IN, a file of little-endian values (a multiple of the block: 32 for
//! Q8_0, 256 for the K-quants). The values become a 1-D CPU tensor of that
//! dtype, which `QTensor::quantize` widens to f32 and quantizes, as it does
//! for any tensor; OUT receives `QTensor::data()`, the GGUF block bytes.
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Device, Tensor};
use std::process::ExitCode;

fn run(args: &[String]) -> Result<(), String> {
    let [format, dtype, input, output] = args else {
        return Err("usage: candle_quantize Q8_0|Q4K|Q5K|Q6K f32|f16|bf16 IN OUT".into());
    };
    let ggml = match format.as_str() {
        "Q8_0" => GgmlDType::Q8_0,
        "Q4K" => GgmlDType::Q4K,
        "Q5K" => GgmlDType::Q5K,
        "Q6K" => GgmlDType::Q6K,
        other => return Err(format!("unknown format {other}")),
    };
    let bytes = std::fs::read(input).map_err(|e| format!("{input}: {e}"))?;
    let (dt, size) = match dtype.as_str() {
        "f32" => (DType::F32, 4),
        "f16" => (DType::F16, 2),
        "bf16" => (DType::BF16, 2),
        other => return Err(format!("unknown dtype {other}")),
    };
    if bytes.len() % size != 0 {
        return Err(format!("{input}: {} bytes is not a whole number of {dtype}", bytes.len()));
    }
    let n = bytes.len() / size;
    let tensor = Tensor::from_raw_buffer(&bytes, dt, &[n], &Device::Cpu).map_err(|e| e.to_string())?;
    let q = QTensor::quantize(&tensor, ggml).map_err(|e| e.to_string())?;
    let data = q.data().map_err(|e| e.to_string())?;
    std::fs::write(output, &*data).map_err(|e| format!("{output}: {e}"))?;
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("candle_quantize: {e}");
            ExitCode::FAILURE
        }
    }
}
