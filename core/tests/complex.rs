//! Complex numbers and int16 through the real compiler: arithmetic against plain Rust, the
//! Fourier transforms against a direct DFT, and clear errors where complex numbers have no
//! meaning (order, rounding).

use std::f64::consts::PI;
use std::sync::Mutex;

use xlaprof_core::ir::FftKind;
use xlaprof_core::{sync, DType, Tensor};

static SERIAL: Mutex<()> = Mutex::new(());

fn close(got: &[[f64; 2]], want: &[[f64; 2]], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = (g[0] - w[0]).abs() <= 1e-9 && (g[1] - w[1]).abs() <= 1e-9;
        assert!(ok, "{what}: element {i} is {g:?}, expected {w:?}");
    }
}

#[test]
fn complex_arithmetic_matches_rust() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (re, im) = ([1.0f64, -2.0, 0.5], [0.5f64, 3.0, -1.0]);
    let z = Tensor::from_slice(&re, &[3]).unwrap().complex(&Tensor::from_slice(&im, &[3]).unwrap());
    let z = z.unwrap();
    assert_eq!(z.dtype(), DType::C128);
    let w = Tensor::from_slice(&[[2.0f64, -1.0], [0.0, 1.0], [1.5, 0.25]], &[3]).unwrap();
    let (prod, quot, sum) = (z.mul(&w).unwrap(), z.div(&w).unwrap(), z.add_scalar(2.0).unwrap());
    let (mag, real, imag) = (z.abs().unwrap(), z.real().unwrap(), z.imag().unwrap());
    let exp = z.exp().unwrap();
    sync().unwrap();
    let zs: Vec<[f64; 2]> = re.iter().zip(&im).map(|(&a, &b)| [a, b]).collect();
    let ws = w.to_vec::<[f64; 2]>().unwrap();
    let mul = |a: [f64; 2], b: [f64; 2]| [a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]];
    let div = |a: [f64; 2], b: [f64; 2]| {
        let d = b[0] * b[0] + b[1] * b[1];
        [(a[0] * b[0] + a[1] * b[1]) / d, (a[1] * b[0] - a[0] * b[1]) / d]
    };
    let want_prod: Vec<[f64; 2]> = zs.iter().zip(&ws).map(|(&a, &b)| mul(a, b)).collect();
    let want_quot: Vec<[f64; 2]> = zs.iter().zip(&ws).map(|(&a, &b)| div(a, b)).collect();
    close(&prod.to_vec::<[f64; 2]>().unwrap(), &want_prod, "z * w");
    close(&quot.to_vec::<[f64; 2]>().unwrap(), &want_quot, "z / w");
    let want_sum: Vec<[f64; 2]> = zs.iter().map(|a| [a[0] + 2.0, a[1]]).collect();
    close(&sum.to_vec::<[f64; 2]>().unwrap(), &want_sum, "z + 2");
    let want_exp: Vec<[f64; 2]> =
        zs.iter().map(|a| [a[0].exp() * a[1].cos(), a[0].exp() * a[1].sin()]).collect();
    close(&exp.to_vec::<[f64; 2]>().unwrap(), &want_exp, "exp(z)");
    assert_eq!(mag.dtype(), DType::F64);
    let want_mag: Vec<f64> = zs.iter().map(|a| a[0].hypot(a[1])).collect();
    for (g, w) in mag.to_vec::<f64>().unwrap().iter().zip(&want_mag) {
        assert!((g - w).abs() < 1e-12, "|z|: {g} vs {w}");
    }
    assert_eq!(real.to_vec::<f64>().unwrap(), re);
    assert_eq!(imag.to_vec::<f64>().unwrap(), im);
}

/// The DFT by its definition: `X[k] = sum_j x[j] e^{-2 pi i j k / n}`.
fn dft(x: &[[f64; 2]]) -> Vec<[f64; 2]> {
    let n = x.len();
    (0..n)
        .map(|k| {
            x.iter().enumerate().fold([0.0, 0.0], |acc, (j, v)| {
                let a = -2.0 * PI * (j * k) as f64 / n as f64;
                [acc[0] + v[0] * a.cos() - v[1] * a.sin(), acc[1] + v[0] * a.sin() + v[1] * a.cos()]
            })
        })
        .collect()
}

#[test]
fn fourier_transforms_match_the_dft_and_invert() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let x: Vec<f64> = (0..8).map(|i| ((i * 7 % 5) as f64) - 1.5).collect();
    let real = Tensor::from_slice(&x, &[8]).unwrap();
    let spectrum = real.fft(FftKind::Rfft, &[8]).unwrap();
    let back = spectrum.fft(FftKind::Irfft, &[8]).unwrap();
    let z = real.complex(&real.mul_scalar(0.5).unwrap()).unwrap();
    let full = z.fft(FftKind::Fft, &[8]).unwrap();
    let again = full.fft(FftKind::Ifft, &[8]).unwrap();
    sync().unwrap();
    let as_complex: Vec<[f64; 2]> = x.iter().map(|&v| [v, 0.0]).collect();
    close(&spectrum.to_vec::<[f64; 2]>().unwrap(), &dft(&as_complex)[..5], "rfft");
    for (g, w) in back.to_vec::<f64>().unwrap().iter().zip(&x) {
        assert!((g - w).abs() < 1e-9, "irfft(rfft(x)): {g} vs {w}");
    }
    let zs: Vec<[f64; 2]> = x.iter().map(|&v| [v, 0.5 * v]).collect();
    close(&full.to_vec::<[f64; 2]>().unwrap(), &dft(&zs), "fft");
    close(&again.to_vec::<[f64; 2]>().unwrap(), &zs, "ifft(fft(z))");
}

#[test]
fn int16_round_trips_and_complex_numbers_refuse_order() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let s = Tensor::from_slice(&[-300i16, 7, 32000], &[3]).unwrap();
    let doubled = s.add(&s).unwrap();
    let z = Tensor::from_slice(&[[1.0f32, 2.0]], &[1]).unwrap();
    sync().unwrap();
    assert_eq!(doubled.to_vec::<i16>().unwrap(), vec![-600, 14, 32000i16.wrapping_mul(2)]);
    let err = z.lt(&z).unwrap_err().to_string();
    assert!(err.contains("not ordered") && err.contains("c64[1]"), "{err}");
    let err = z.floor().unwrap_err().to_string();
    assert!(err.contains("complex"), "{err}");
    let err = Tensor::from_slice(&[1.0f32; 4], &[4]).unwrap().fft(FftKind::Fft, &[4]).unwrap_err();
    assert!(err.to_string().contains("complex input"), "{err}");
    for lengths in [&[][..], &[4, 4][..]] {
        let err = z.fft(FftKind::Irfft, lengths).unwrap_err().to_string();
        assert!(err.contains("c64[1]"), "{err}");
    }
}
