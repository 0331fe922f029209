//! Shared pieces of the samples: a synthetic, learnable classification set, and the MLP the
//! samples and benchmarks train.

use xlaprof_core::nn::{Linear, Module};
use xlaprof_core::{Result, Tensor};

/// Classes are noisy copies of fixed random prototypes, so a model can learn them.
pub struct Prototypes {
    features: usize,
    prototypes: Vec<f32>,
    classes: usize,
    state: u64,
}

impl Prototypes {
    pub fn new(classes: usize, features: usize, seed: u64) -> Prototypes {
        let mut p = Prototypes { features, prototypes: Vec::new(), classes, state: seed | 1 };
        p.prototypes = (0..classes * features).map(|_| p.next() * 2.0 - 1.0).collect();
        p
    }

    fn next(&mut self) -> f32 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state >> 40) as f32 / (1u64 << 24) as f32
    }

    /// A batch: inputs `[batch, features]` (f32) and labels `[batch]` (s64), on the host.
    pub fn batch_host(&mut self, batch: usize, noise: f32) -> (Vec<f32>, Vec<i64>) {
        let mut x = Vec::with_capacity(batch * self.features);
        let mut y = Vec::with_capacity(batch);
        for _ in 0..batch {
            let label = ((self.next() * self.classes as f32) as usize).min(self.classes - 1);
            y.push(label as i64);
            for f in 0..self.features {
                let p = self.prototypes[label * self.features + f];
                x.push(p + (self.next() * 2.0 - 1.0) * noise);
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

/// Fraction of rows whose argmax matches the label.
pub fn accuracy(logits: &Tensor, labels: &Tensor) -> Result<f64> {
    let predicted = logits.argmax(-1, false)?.to_vec::<i64>()?;
    let labels = labels.to_vec::<i64>()?;
    let right = predicted.iter().zip(&labels).filter(|(p, l)| p == l).count();
    Ok(right as f64 / labels.len().max(1) as f64)
}
