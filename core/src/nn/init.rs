//! Deterministic host-side initial values (xorshift + Box-Muller): uploading them costs no compile.

pub(crate) struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }

    fn next_unit(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }

    /// `n` values uniform in `[-bound, bound)`.
    pub fn uniform(&mut self, n: usize, bound: f32) -> Vec<f32> {
        (0..n).map(|_| (self.next_unit() * 2.0 - 1.0) * bound).collect()
    }

    /// `n` standard normal values.
    pub fn normal(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let u1 = 1.0 - self.next_unit();
                let u2 = self.next_unit();
                (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
            })
            .collect()
    }
}
