//! Factorizations through the real compiler, checked by what defines them (`L L^T = A`,
//! `Q R = A` with `Q^T Q = I`, `A V = V diag(w)`, `P A = L U`), and LU's pivots against a
//! textbook partial-pivoting LU in plain Rust.

use std::sync::Mutex;

use xlaprof_core::{sync, DType, Error, Tensor};

static SERIAL: Mutex<()> = Mutex::new(());

/// Row-major `rows x cols` matrices of deterministic values in [-1, 1).
fn matrices(count: usize, rows: usize, cols: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..count * rows * cols)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|t| a[i * k + t] * b[t * n + j]).sum();
        }
    }
    c
}

fn transpose(a: &[f64], m: usize, n: usize) -> Vec<f64> {
    (0..n * m).map(|x| a[(x % m) * n + x / m]).collect()
}

fn close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-9 + 1e-9 * w.abs(), "{what}: element {i} is {g}, expected {w}");
    }
}

/// Symmetric positive-definite: `M M^T + n I`.
fn spd(n: usize, seed: u64) -> Vec<f64> {
    let m = matrices(1, n, n, seed);
    let mut a = matmul(&m, &transpose(&m, n, n), n, n, n);
    for i in 0..n {
        a[i * n + i] += n as f64;
    }
    a
}

#[test]
fn cholesky_factors_reconstruct_and_zero_the_other_triangle() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let n = 5;
    let a = spd(n, 1);
    // Each reads its own triangle alone: the other one holds garbage.
    let (mut lower_only, mut upper_only) = (a.clone(), a.clone());
    for i in 0..n {
        for j in 0..n {
            if j > i {
                lower_only[i * n + j] = 7.0;
            }
            if j < i {
                upper_only[i * n + j] = -7.0;
            }
        }
    }
    let dims = [n as i64, n as i64];
    let l = Tensor::from_slice(&lower_only, &dims).unwrap().cholesky(false).unwrap();
    let u = Tensor::from_slice(&upper_only, &dims).unwrap().cholesky(true).unwrap();
    sync().unwrap();
    let (l, u) = (l.to_vec::<f64>().unwrap(), u.to_vec::<f64>().unwrap());
    for i in 0..n {
        for j in 0..n {
            if j > i {
                assert_eq!(l[i * n + j], 0.0, "L above the diagonal");
            }
            if j < i {
                assert_eq!(u[i * n + j], 0.0, "U below the diagonal");
            }
        }
    }
    close(&matmul(&l, &transpose(&l, n, n), n, n, n), &a, "L L^T");
    close(&matmul(&transpose(&u, n, n), &u, n, n, n), &a, "U^T U");
}

#[test]
fn triangular_solves_satisfy_their_equations() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (n, k) = (4, 3);
    let mut a = matrices(1, n, n, 2);
    for i in 0..n {
        a[i * n + i] += 3.0; // well conditioned
    }
    let at = Tensor::from_slice(&a, &[n as i64, n as i64]).unwrap();
    let mut cases = Vec::new();
    for left in [true, false] {
        for lower in [true, false] {
            for transpose_a in [false, true] {
                for unit in [false, true] {
                    let (rows, cols) = if left { (n, k) } else { (k, n) };
                    let b = matrices(1, rows, cols, 3);
                    let bt = Tensor::from_slice(&b, &[rows as i64, cols as i64]).unwrap();
                    let x = at.triangular_solve(&bt, left, lower, unit, transpose_a).unwrap();
                    cases.push((left, lower, transpose_a, unit, b, x));
                }
            }
        }
    }
    sync().unwrap();
    for (left, lower, transpose_a, unit, b, x) in cases {
        let mut t = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                let keep = if lower { j <= i } else { j >= i };
                t[i * n + j] = if i == j && unit {
                    1.0
                } else if keep {
                    a[i * n + j]
                } else {
                    0.0
                };
            }
        }
        let op = if transpose_a { transpose(&t, n, n) } else { t };
        let x = x.to_vec::<f64>().unwrap();
        let got = if left { matmul(&op, &x, n, n, k) } else { matmul(&x, &op, k, n, n) };
        close(&got, &b, &format!("left {left} lower {lower} transpose {transpose_a} unit {unit}"));
    }
}

#[test]
fn qr_and_householder_product_reconstruct_with_orthonormal_q() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (batch, m, n) = (2, 5, 3);
    let a = matrices(batch, m, n, 4);
    let t = Tensor::from_slice(&a, &[batch as i64, m as i64, n as i64]).unwrap();
    let (h, tau) = t.geqrf().unwrap();
    let q = h.householder_product(&tau).unwrap();
    sync().unwrap();
    assert_eq!(tau.dims(), &[2, 3]);
    let (h, q) = (h.to_vec::<f64>().unwrap(), q.to_vec::<f64>().unwrap());
    for b in 0..batch {
        let hb = &h[b * m * n..(b + 1) * m * n];
        let qb = &q[b * m * n..(b + 1) * m * n];
        let r: Vec<f64> = (0..n * n).map(|x| if x % n >= x / n { hb[x] } else { 0.0 }).collect();
        close(&matmul(qb, &r, m, n, n), &a[b * m * n..(b + 1) * m * n], "Q R");
        let eye: Vec<f64> = (0..n * n).map(|x| (x % n == x / n) as u8 as f64).collect();
        close(&matmul(&transpose(qb, m, n), qb, n, m, n), &eye, "Q^T Q");
    }
}

#[test]
fn eigh_gives_ascending_eigenpairs() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let n = 6;
    let a = spd(n, 5);
    let t = Tensor::from_slice(&a, &[n as i64, n as i64]).unwrap();
    let (w, v) = t.eigh(false).unwrap();
    // The upper triangle alone: the lower one replaced by garbage must not matter.
    let mut upper_only = a.clone();
    for i in 0..n {
        for j in 0..i {
            upper_only[i * n + j] = 100.0;
        }
    }
    let (wu, _) = Tensor::from_slice(&upper_only, &[6, 6]).unwrap().eigh(true).unwrap();
    sync().unwrap();
    let (w, v, wu) =
        (w.to_vec::<f64>().unwrap(), v.to_vec::<f64>().unwrap(), wu.to_vec::<f64>().unwrap());
    assert!(w.windows(2).all(|p| p[0] <= p[1]), "ascending: {w:?}");
    let av = matmul(&a, &v, n, n, n);
    let vw: Vec<f64> = (0..n * n).map(|x| v[x] * w[x % n]).collect();
    for (g, e) in av.iter().zip(&vw) {
        assert!((g - e).abs() < 1e-6, "A V = V diag(w): {g} vs {e}");
    }
    for (g, e) in wu.iter().zip(&w) {
        assert!((g - e).abs() < 1e-6, "upper triangle: {g} vs {e}");
    }
}

/// LAPACK's `getrf` in plain Rust: partial pivoting, the first largest magnitude.
fn reference_lu(a: &[f64], m: usize, n: usize) -> (Vec<f64>, Vec<i32>) {
    let mut a = a.to_vec();
    let mut pivots = Vec::new();
    for k in 0..m.min(n) {
        let mut p = k;
        for i in k + 1..m {
            if a[i * n + k].abs() > a[p * n + k].abs() {
                p = i;
            }
        }
        pivots.push(p as i32 + 1);
        for j in 0..n {
            a.swap(k * n + j, p * n + j);
        }
        let d = a[k * n + k];
        if d != 0.0 {
            for i in k + 1..m {
                a[i * n + k] /= d;
            }
        }
        for i in k + 1..m {
            for j in k + 1..n {
                a[i * n + j] -= a[i * n + k] * a[k * n + j];
            }
        }
    }
    (a, pivots)
}

#[test]
fn lu_matches_partial_pivoting_per_matrix_of_a_batch() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for (m, n) in [(4, 4), (5, 3), (3, 5)] {
        let batch = 3;
        let mut a = matrices(batch, m, n, 6 + m as u64);
        // A matrix whose first column is zero: no pivot there, and no NaN.
        for i in 0..m {
            a[2 * m * n + i * n] = 0.0;
        }
        let t = Tensor::from_slice(&a, &[batch as i64, m as i64, n as i64]).unwrap();
        let (lu, pivots, perm) = t.lu().unwrap();
        let again = pivots.lu_pivots_to_permutation(m).unwrap();
        sync().unwrap();
        assert_eq!((pivots.dtype(), perm.dtype()), (DType::S32, DType::S32));
        let (lu, pivots) = (lu.to_vec::<f64>().unwrap(), pivots.to_vec::<i32>().unwrap());
        let (perm, again) = (perm.to_vec::<i32>().unwrap(), again.to_vec::<i32>().unwrap());
        assert_eq!(perm, again, "lu_pivots_to_permutation");
        let k = m.min(n);
        for b in 0..batch {
            let ab = &a[b * m * n..(b + 1) * m * n];
            let (want_lu, want_piv) = reference_lu(ab, m, n);
            assert_eq!(&pivots[b * k..(b + 1) * k], want_piv.as_slice(), "{m}x{n} pivots");
            close(&lu[b * m * n..(b + 1) * m * n], &want_lu, &format!("{m}x{n} factors"));
            // P A = L U, from the factors alone.
            let f = &lu[b * m * n..(b + 1) * m * n];
            let l: Vec<f64> = (0..m * k)
                .map(|x| {
                    let (i, j) = (x / k, x % k);
                    if i == j {
                        1.0
                    } else if i > j {
                        f[i * n + j]
                    } else {
                        0.0
                    }
                })
                .collect();
            let u: Vec<f64> = (0..k * n).map(|x| if x % n >= x / n { f[x] } else { 0.0 }).collect();
            let pa: Vec<f64> =
                (0..m * n).map(|x| ab[perm[b * m + x / n] as usize * n + x % n]).collect();
            close(&matmul(&l, &u, m, k, n), &pa, &format!("{m}x{n} P A = L U"));
        }
    }
}

#[test]
fn factorizations_name_what_they_cannot_take() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let wide = Tensor::zeros(&[2, 3], DType::F32);
    let err = wide.cholesky(false).unwrap_err().to_string();
    assert!(err.contains("square") && err.contains("f32[2,3]"), "{err}");
    let ints = Tensor::zeros(&[3, 3], DType::S64);
    let err = ints.lu().unwrap_err().to_string();
    assert!(err.contains("float32 or float64") && err.contains("s64[3,3]"), "{err}");
    let w = Tensor::zeros(&[3, 3], DType::F32);
    w.set_requires_grad(true);
    assert!(matches!(w.eigh(false), Err(Error::Autograd { .. })));
    let a = Tensor::zeros(&[3, 3], DType::F32);
    let b = Tensor::zeros(&[4, 2], DType::F32);
    let err = a.triangular_solve(&b, true, true, false, false).unwrap_err().to_string();
    assert!(err.contains("f32[3,3]") && err.contains("f32[4,2]"), "{err}");
}
