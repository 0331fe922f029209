//! Optimizers. Each update is recorded as IR and rebinds the parameter (and the optimizer state)
//! in place; the learning rate and step-dependent factors are host scalars, i.e. graph inputs, so
//! changing them never recompiles.

use crate::autograd::no_grad;
use crate::error::Result;
use crate::tensor::Tensor;

use super::data_zeros_like;

pub trait Optimizer {
    /// Records the update of every parameter that has a gradient.
    fn step(&mut self) -> Result<()>;
    /// Drops the accumulated gradients.
    fn zero_grad(&self);
}

/// Stochastic gradient descent with optional momentum and weight decay (PyTorch's semantics).
pub struct Sgd {
    params: Vec<Tensor>,
    pub lr: f64,
    pub momentum: f64,
    pub weight_decay: f64,
    velocity: Vec<Option<Tensor>>,
}

impl Sgd {
    pub fn new(params: Vec<Tensor>, lr: f64) -> Sgd {
        let velocity = vec![None; params.len()];
        Sgd { params, lr, momentum: 0.0, weight_decay: 0.0, velocity }
    }

    #[track_caller]
    pub fn with_momentum(mut self, momentum: f64) -> Result<Sgd> {
        self.momentum = momentum;
        self.velocity = Vec::with_capacity(self.params.len());
        for p in &self.params {
            self.velocity.push(Some(data_zeros_like(p)?));
        }
        Ok(self)
    }

    pub fn with_weight_decay(mut self, weight_decay: f64) -> Sgd {
        self.weight_decay = weight_decay;
        self
    }
}

impl Optimizer for Sgd {
    #[track_caller]
    fn step(&mut self) -> Result<()> {
        no_grad(|| {
            for (p, v) in self.params.iter().zip(self.velocity.iter_mut()) {
                let Some(mut g) = p.grad() else { continue };
                if self.weight_decay != 0.0 {
                    g = g.add(&p.mul_scalar(self.weight_decay)?)?;
                }
                if let Some(v) = v {
                    let nv = v.mul_scalar(self.momentum)?.add(&g)?;
                    v.rebind(&nv);
                    g = nv;
                }
                p.rebind(&p.sub(&g.mul_scalar(self.lr)?)?);
            }
            Ok(())
        })
    }

    fn zero_grad(&self) {
        self.params.iter().for_each(Tensor::zero_grad);
    }
}

/// Adam, or AdamW with decoupled weight decay.
pub struct Adam {
    params: Vec<Tensor>,
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    /// Decoupled weight decay (AdamW) instead of L2 in the gradient (Adam).
    pub decoupled: bool,
    step: u64,
    m: Vec<Tensor>,
    v: Vec<Tensor>,
}

impl Adam {
    #[track_caller]
    pub fn new(params: Vec<Tensor>, lr: f64) -> Result<Adam> {
        let (mut m, mut v) = (Vec::with_capacity(params.len()), Vec::with_capacity(params.len()));
        for p in &params {
            m.push(data_zeros_like(p)?);
            v.push(data_zeros_like(p)?);
        }
        Ok(Adam {
            params,
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled: false,
            step: 0,
            m,
            v,
        })
    }

    /// AdamW: weight decay applied to the parameter directly.
    #[track_caller]
    pub fn adamw(params: Vec<Tensor>, lr: f64, weight_decay: f64) -> Result<Adam> {
        let mut a = Adam::new(params, lr)?;
        a.weight_decay = weight_decay;
        a.decoupled = true;
        Ok(a)
    }
}

impl Optimizer for Adam {
    fn step(&mut self) -> Result<()> {
        self.step += 1;
        let (b1, b2) = self.betas;
        let c1 = 1.0 - b1.powi(self.step as i32);
        let c2 = 1.0 - b2.powi(self.step as i32);
        no_grad(|| {
            for ((p, m), v) in self.params.iter().zip(&self.m).zip(&self.v) {
                let Some(mut g) = p.grad() else { continue };
                if self.weight_decay != 0.0 && !self.decoupled {
                    g = g.add(&p.mul_scalar(self.weight_decay)?)?;
                }
                let nm = m.mul_scalar(b1)?.add(&g.mul_scalar(1.0 - b1)?)?;
                let nv = v.mul_scalar(b2)?.add(&g.mul(&g)?.mul_scalar(1.0 - b2)?)?;
                // PyTorch's form: the step-dependent factors are lr / c1 and sqrt(c2). Never c1 or
                // c2 alone: at step 1 they equal 1 - b1 and 1 - b2 exactly, and equal host
                // scalars at one line share a graph input, so step 2 would compile again.
                let denom = nv.sqrt()?.div_scalar(c2.sqrt())?.add_scalar(self.eps)?;
                let mut np = p.sub(&nm.div(&denom)?.mul_scalar(self.lr / c1)?)?;
                if self.weight_decay != 0.0 && self.decoupled {
                    np = np.sub(&p.mul_scalar(self.lr * self.weight_decay)?)?;
                }
                m.rebind(&nm);
                v.rebind(&nv);
                p.rebind(&np);
            }
            Ok(())
        })
    }

    fn zero_grad(&self) {
        self.params.iter().for_each(Tensor::zero_grad);
    }
}
