//! Shared pieces of the samples: synthetic, learnable data sets (feature vectors, small images,
//! token sequences), and the MLP the samples and benchmarks train.

pub mod parallel;

use xlaprof_core::nn::{Linear, Module};
use xlaprof_core::{Result, Tensor};

/// Classes are noisy copies of fixed random prototypes, so a model can learn them.
pub struct Prototypes {
    features: usize,
    prototypes: Vec<f32>,
    classes: usize,
    rng: XorShift,
}

impl Prototypes {
    pub fn new(classes: usize, features: usize, seed: u64) -> Prototypes {
        // The seed as it is (not mixed as `XorShift::new` mixes it): the data set stays the same.
        let mut rng = XorShift(seed | 1);
        let prototypes = (0..classes * features).map(|_| rng.unit() * 2.0 - 1.0).collect();
        Prototypes { features, prototypes, classes, rng }
    }

    /// A batch: inputs `[batch, features]` (f32) and labels `[batch]` (s64), on the host.
    pub fn batch_host(&mut self, batch: usize, noise: f32) -> (Vec<f32>, Vec<i64>) {
        let mut x = Vec::with_capacity(batch * self.features);
        let mut y = Vec::with_capacity(batch);
        for _ in 0..batch {
            let label = ((self.rng.unit() * self.classes as f32) as usize).min(self.classes - 1);
            y.push(label as i64);
            for f in 0..self.features {
                let p = self.prototypes[label * self.features + f];
                x.push(p + (self.rng.unit() * 2.0 - 1.0) * noise);
            }
        }
        (x, y)
    }

    /// The same batch, uploaded.
    pub fn batch(&mut self, batch: usize, noise: f32) -> Result<(Tensor, Tensor)> {
        let (x, y) = self.batch_host(batch, noise);
        Ok((
            Tensor::from_slice(&x, &[batch as i64, self.features as i64])?,
            Tensor::from_slice(&y, &[batch as i64])?,
        ))
    }
}

/// A multi-layer perceptron with ReLU between layers.
pub struct Mlp {
    pub layers: Vec<Linear>,
}

impl Mlp {
    pub fn new(sizes: &[usize], seed: u64) -> Result<Mlp> {
        let layers = sizes
            .windows(2)
            .enumerate()
            .map(|(i, w)| Linear::new(w[0], w[1], true, seed + i as u64))
            .collect::<Result<_>>()?;
        Ok(Mlp { layers })
    }

    #[track_caller]
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.clone();
        for (i, layer) in self.layers.iter().enumerate() {
            h = layer.forward(&h)?;
            if i + 1 < self.layers.len() {
                h = h.relu()?;
            }
        }
        Ok(h)
    }
}

impl Module for Mlp {
    fn parameters(&self) -> Vec<Tensor> {
        self.layers.iter().flat_map(|l| l.parameters()).collect()
    }
}

/// The smallest loop there is: `steps` steps of one add each, seven profile records a step. The
/// benchmarks of the viewers grow their million-event profiles with it.
pub fn tiny_steps(steps: usize) -> Result<()> {
    let x = Tensor::from_slice(&[1f32; 4], &[4])?;
    for _ in 0..steps {
        let _y = x.add_scalar(1.0)?;
        xlaprof_core::step()?;
    }
    Ok(())
}

/// Fraction of rows whose argmax matches the label.
pub fn accuracy(logits: &Tensor, labels: &Tensor) -> Result<f64> {
    let predicted = logits.argmax(-1, false)?.to_vec::<i64>()?;
    let labels = labels.to_vec::<i64>()?;
    let right = predicted.iter().zip(&labels).filter(|(p, l)| p == l).count();
    Ok(right as f64 / labels.len().max(1) as f64)
}

/// A small xorshift generator for the synthetic data sets (deterministic per seed).
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in `lo..hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        (lo + (self.unit() * (hi - lo) as f32) as usize).min(hi - 1)
    }
}

/// Single-channel `size` x `size` images of simple shapes, one class per shape, drawn at random
/// positions and lengths with uniform noise on every pixel: a small CNN learns them in a few
/// dozen steps, a linear model on the raw pixels does not (the shapes move).
pub struct Shapes {
    size: usize,
    rng: XorShift,
}

impl Shapes {
    /// The classes, by label.
    pub const CLASSES: [&'static str; 4] = ["horizontal bar", "vertical bar", "diagonal", "blob"];

    pub fn new(size: usize, seed: u64) -> Shapes {
        assert!(size >= 8, "images of at least 8 x 8");
        Shapes { size, rng: XorShift::new(seed) }
    }

    /// One image of class `label`, row-major, values near 0 (background) and 1 (shape).
    fn draw(&mut self, label: usize, noise: f32) -> Vec<f32> {
        let s = self.size;
        let mut img = vec![0f32; s * s];
        match label {
            // A bar two pixels thick, at least half the image long.
            0 | 1 => {
                let at = self.rng.range(0, s - 1);
                let len = self.rng.range(s / 2, s + 1);
                let from = self.rng.range(0, s - len + 1);
                for along in from..from + len {
                    for across in at..at + 2 {
                        let (r, c) = if label == 0 { (across, along) } else { (along, across) };
                        img[r * s + c] = 1.0;
                    }
                }
            }
            // A line along either diagonal direction, shifted.
            2 => {
                let shift = self.rng.range(0, s / 2) as i64 - (s / 4) as i64;
                let anti = self.rng.unit() < 0.5;
                for r in 0..s as i64 {
                    let c = if anti { s as i64 - 1 - r + shift } else { r + shift };
                    if (0..s as i64).contains(&c) {
                        img[r as usize * s + c as usize] = 1.0;
                    }
                }
            }
            // A filled square, 3 to 5 pixels wide.
            _ => {
                let w = self.rng.range(3, 6);
                let (r0, c0) = (self.rng.range(0, s - w + 1), self.rng.range(0, s - w + 1));
                for r in r0..r0 + w {
                    for c in c0..c0 + w {
                        img[r * s + c] = 1.0;
                    }
                }
            }
        }
        for p in &mut img {
            *p += (self.rng.unit() * 2.0 - 1.0) * noise;
        }
        img
    }

    /// A batch: images `[batch, 1, size, size]` (f32, row-major) and labels `[batch]`, on the host.
    pub fn batch_host(&mut self, batch: usize, noise: f32) -> (Vec<f32>, Vec<i64>) {
        let mut x = Vec::with_capacity(batch * self.size * self.size);
        let mut y = Vec::with_capacity(batch);
        for _ in 0..batch {
            let label = self.rng.range(0, Self::CLASSES.len());
            x.extend(self.draw(label, noise));
            y.push(label as i64);
        }
        (x, y)
    }

    /// The same batch, uploaded.
    pub fn batch(&mut self, batch: usize, noise: f32) -> Result<(Tensor, Tensor)> {
        let (x, y) = self.batch_host(batch, noise);
        let s = self.size as i64;
        Ok((
            Tensor::from_slice(&x, &[batch as i64, 1, s, s])?,
            Tensor::from_slice(&y, &[batch as i64])?,
        ))
    }
}

/// Token sequences that repeat a random block of `period` tokens: after the first block every
/// next token is the one `period` places back, which one causal attention layer can learn from
/// the positions alone. The first `period - 1` targets of a row cannot be predicted.
pub struct Repeats {
    pub vocab: usize,
    pub period: usize,
    pub len: usize,
    rng: XorShift,
}

impl Repeats {
    pub fn new(vocab: usize, period: usize, len: usize, seed: u64) -> Repeats {
        assert!(period >= 1 && period < len && vocab >= 2);
        Repeats { vocab, period, len, rng: XorShift::new(seed) }
    }

    /// A batch of `batch` rows of `len + 1` tokens, split into inputs `[batch, len]` (the first
    /// `len` tokens) and next-token targets `[batch * len]` (the last `len`), on the host.
    pub fn batch_host(&mut self, batch: usize) -> (Vec<i64>, Vec<i64>) {
        let mut inputs = Vec::with_capacity(batch * self.len);
        let mut targets = Vec::with_capacity(batch * self.len);
        for _ in 0..batch {
            let block: Vec<i64> =
                (0..self.period).map(|_| self.rng.range(0, self.vocab) as i64).collect();
            let row: Vec<i64> = (0..=self.len).map(|t| block[t % self.period]).collect();
            inputs.extend_from_slice(&row[..self.len]);
            targets.extend_from_slice(&row[1..]);
        }
        (inputs, targets)
    }

    /// The same batch, uploaded: inputs `[batch, len]` and targets `[batch * len]` (s64).
    pub fn batch(&mut self, batch: usize) -> Result<(Tensor, Tensor)> {
        let (x, y) = self.batch_host(batch);
        Ok((
            Tensor::from_slice(&x, &[batch as i64, self.len as i64])?,
            Tensor::from_slice(&y, &[(batch * self.len) as i64])?,
        ))
    }

    /// Whether target `t` of a row (predicting token `t + 1`) follows from the tokens before it.
    pub fn predictable(&self, t: usize) -> bool {
        t + 1 >= self.period
    }
}
