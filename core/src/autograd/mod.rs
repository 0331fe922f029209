//! Reverse-mode autograd over the same lazy IR: backward builds more IR, which the next sync
//! compiles together with the forward pass and the optimizer update into one graph.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::location::SourceLocation;
use crate::tensor::Tensor;
use crate::Error;

type Backward = dyn Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync;

/// How to push an output's gradient to the inputs of the op that made it. Like PyTorch, the
/// saved inputs are released once `backward` has used them, so the forward activations do not
/// stay alive (and become outputs of the next sync).
pub(crate) struct GradFn {
    pub name: &'static str,
    saved: Mutex<Option<Saved>>,
}

struct Saved {
    inputs: Vec<Tensor>,
    backward: Box<Backward>,
}

impl GradFn {
    fn inputs(&self) -> Vec<Tensor> {
        let saved = self.saved.lock().unwrap_or_else(|p| p.into_inner());
        saved.as_ref().map(|s| s.inputs.clone()).unwrap_or_default()
    }

    fn take(&self) -> Option<Saved> {
        self.saved.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

pub(crate) fn grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Runs `f` without recording gradients (PyTorch's `torch.no_grad()`).
pub fn no_grad<R>(f: impl FnOnce() -> R) -> R {
    /// Restores the previous mode even if `f` unwinds.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            GRAD_ENABLED.with(|g| g.set(self.0));
        }
    }
    let _restore = Restore(GRAD_ENABLED.with(|g| g.replace(false)));
    f()
}

impl Tensor {
    pub fn requires_grad(&self) -> bool {
        self.0.requires_grad.load(Ordering::Relaxed)
    }

    /// Marks a leaf tensor as a parameter whose gradient `backward` accumulates.
    pub fn set_requires_grad(&self, requires: bool) -> &Tensor {
        self.0.requires_grad.store(requires, Ordering::Relaxed);
        self
    }

    /// The accumulated gradient of a leaf, if any.
    pub fn grad(&self) -> Option<Tensor> {
        self.0.grad.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the gradient (what `p.grad = g` does in PyTorch: gradient clipping and scaling
    /// write it). It must have the parameter's shape and dtype.
    #[track_caller]
    pub fn set_grad(&self, grad: Tensor) -> Result<()> {
        if grad.shape() != self.shape() || grad.dtype() != self.dtype() {
            return Err(Error::Autograd {
                message: format!(
                    "a gradient must have its tensor's shape and dtype: the tensor is {}, the gradient {}",
                    self.shape(),
                    grad.shape()
                ),
                location: SourceLocation::caller(),
            });
        }
        *self.0.grad.lock().unwrap_or_else(|p| p.into_inner()) = Some(grad.detach());
        Ok(())
    }

    pub fn zero_grad(&self) {
        *self.0.grad.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The same value, cut from the autograd graph.
    pub fn detach(&self) -> Tensor {
        Tensor(crate::trace::alias(&self.0.value, |node| {
            crate::tensor::TensorInner::new(node, None)
        }))
    }

    /// Back-propagates from this scalar (one-element) tensor into every leaf that requires grad.
    #[track_caller]
    pub fn backward(&self) -> Result<()> {
        let location = SourceLocation::caller();
        if self.element_count() != 1 {
            return Err(Error::Autograd {
                message: format!(
                    "backward() without a gradient needs a one-element tensor, but this is {}; \
                     pass a gradient of that shape with backward_with",
                    self.shape()
                ),
                location,
            });
        }
        let ones = crate::ops::full_like_at(self, 1.0, location.clone());
        self.backward_at(&ones, location)
    }

    /// Back-propagates `grad` (same shape as this tensor).
    #[track_caller]
    pub fn backward_with(&self, grad: &Tensor) -> Result<()> {
        self.backward_at(grad, SourceLocation::caller())
    }

    fn backward_at(&self, grad: &Tensor, location: SourceLocation) -> Result<()> {
        if grad.shape() != self.shape() {
            return Err(Error::Autograd {
                message: format!(
                    "the gradient is {} but the tensor is {}",
                    grad.shape(),
                    self.shape()
                ),
                location,
            });
        }
        if !self.requires_grad() {
            return Err(Error::Autograd {
                message: format!(
                    "{} does not require grad: no parameter contributed to it",
                    self.shape()
                ),
                location,
            });
        }
        // The backward's ops are recorded at the `backward()` line (where a front end has set
        // no line of its own), not at the engine's lines that make them.
        crate::location::scoped(&location, || {
            no_grad(|| {
                let order = topological_order(self);
                let mut grads: HashMap<u64, Tensor> = HashMap::new();
                grads.insert(self.id(), grad.clone());
                for t in order.iter().rev() {
                    let Some(g) = grads.remove(&t.id()) else {
                        continue;
                    };
                    match &t.0.grad_fn {
                        Some(f) => {
                            let Some(saved) = f.take() else {
                                return Err(Error::Autograd {
                                    message: format!(
                                    "the graph of {} was already used by a backward pass and freed",
                                    t.shape()
                                ),
                                    location: location.clone(),
                                });
                            };
                            let input_grads = (saved.backward)(&g)?;
                            for (input, ig) in saved.inputs.iter().zip(input_grads) {
                                let Some(ig) = ig else { continue };
                                if !input.requires_grad() {
                                    continue;
                                }
                                let sum = match grads.remove(&input.id()) {
                                    Some(prev) => prev.add(&ig)?,
                                    None => ig,
                                };
                                grads.insert(input.id(), sum);
                            }
                        }
                        None => {
                            let mut slot = t.0.grad.lock().unwrap_or_else(|p| p.into_inner());
                            let total = match slot.take() {
                                Some(prev) => prev.add(&g)?,
                                None => g,
                            };
                            // A gradient is split like its parameter (FSDP's sharded gradients).
                            if let Some(s) = t.sharding().filter(|s| !s.is_replicated()) {
                                total.shard_as(s, location.clone())?;
                            }
                            *slot = Some(total);
                        }
                    }
                }
                Ok(())
            })
        })
    }
}

/// Tensors reachable from `root` through grad functions, inputs before users.
fn topological_order(root: &Tensor) -> Vec<Tensor> {
    let mut order = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let inputs_of = |t: &Tensor| t.0.grad_fn.as_ref().map(|f| f.inputs()).unwrap_or_default();
    let mut stack: Vec<(Tensor, Vec<Tensor>, usize)> = vec![(root.clone(), inputs_of(root), 0)];
    seen.insert(root.id());
    while let Some((_, inputs, next)) = stack.last_mut() {
        if *next < inputs.len() {
            let child = inputs[*next].clone();
            *next += 1;
            if child.requires_grad() && seen.insert(child.id()) {
                let child_inputs = inputs_of(&child);
                stack.push((child, child_inputs, 0));
            }
            continue;
        }
        if let Some((t, _, _)) = stack.pop() {
            order.push(t);
        }
    }
    order
}

/// Attaches a grad function when gradients are on and some input requires them.
pub(crate) fn grad_fn(
    name: &'static str,
    inputs: &[&Tensor],
    backward: impl Fn(&Tensor) -> Result<Vec<Option<Tensor>>> + Send + Sync + 'static,
) -> Option<Arc<GradFn>> {
    if !grad_enabled() || !inputs.iter().any(|t| t.requires_grad()) {
        return None;
    }
    Some(Arc::new(GradFn {
        name,
        saved: Mutex::new(Some(Saved {
            inputs: inputs.iter().map(|t| (*t).clone()).collect(),
            backward: Box::new(backward),
        })),
    }))
}
