//! `Tensor`: a cheap, clonable handle to either pending IR or device data.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use crate::autograd::GradFn;
use crate::dtype::{DType, NativeType};
use crate::error::Result;
use crate::events::{self, bump, counter, Direction, Event, SyncCause};
use crate::exec;
use crate::ir::{DeviceData, Inputs, Node, NodeRef, Op};
use crate::location::SourceLocation;
use crate::shape::Shape;
use crate::trace::{self, Holder, Value};

#[derive(Clone)]
pub struct Tensor(pub(crate) Arc<TensorInner>);

pub(crate) struct TensorInner {
    /// The tensor's current value: a pending IR node, or an `Op::Data` leaf once materialized.
    pub value: Value,
    pub shape: Shape,
    pub requires_grad: AtomicBool,
    pub grad: Mutex<Option<Tensor>>,
    pub grad_fn: Option<Arc<GradFn>>,
}

impl TensorInner {
    pub(crate) fn new(node: NodeRef, grad_fn: Option<Arc<GradFn>>) -> Arc<TensorInner> {
        bump(&counter::tensors_created, 1);
        Arc::new(TensorInner {
            shape: node.shape.clone(),
            value: Value::new(node),
            requires_grad: AtomicBool::new(grad_fn.is_some()),
            grad: Mutex::new(None),
            grad_fn,
        })
    }
}

impl Holder for TensorInner {
    fn value(&self) -> &Value {
        &self.value
    }
}

impl Drop for TensorInner {
    /// The value, dropped after this, leaves the pending tensors if it is one.
    fn drop(&mut self) {
        bump(&counter::tensors_destroyed, 1);
    }
}

impl Tensor {
    /// Records a new op node over `inputs` and returns its tensor.
    pub(crate) fn op(
        op: Op,
        shape: Shape,
        inputs: &[&Tensor],
        location: SourceLocation,
        grad_fn: Option<Arc<GradFn>>,
    ) -> Tensor {
        bump(&counter::ops_traced, 1);
        let inputs: smallvec::SmallVec<[&Value; 4]> = inputs.iter().map(|t| &t.0.value).collect();
        Tensor(trace::record(op, shape, &inputs, location, |node| TensorInner::new(node, grad_fn)))
    }

    /// Copies host data to the device: the tensor is device data from the start.
    #[track_caller]
    pub fn from_slice<T: NativeType>(data: &[T], dims: &[i64]) -> Result<Tensor> {
        let location = SourceLocation::caller();
        let engine = exec::engine()?;
        let start = events::now_ns();
        let buffer = engine.client.buffer_from_host(data, dims, engine.device)?;
        note_transfer(Direction::ToDevice, buffer.size_bytes() as u64, start, None);
        Ok(Tensor::from_data(Arc::new(DeviceData::single(buffer)), location))
    }

    /// A scalar tensor holding `value` (a graph input: changing it does not recompile).
    #[track_caller]
    pub fn scalar(value: f64, dtype: DType) -> Tensor {
        let location = SourceLocation::caller();
        bump(&counter::ops_traced, 1);
        let shape = Shape::new(dtype, []);
        let make = |node| TensorInner::new(node, None);
        Tensor(trace::record(Op::Scalar(value), shape, &[], location, make))
    }

    /// `value` broadcast to `shape` (the scalar operand of `x * 0.5`): the graph of
    /// `Tensor::scalar(value, dtype).broadcast_to(dims)`, recorded at about half the cost.
    pub(crate) fn scalar_operand(value: f64, shape: Shape, location: SourceLocation) -> Tensor {
        bump(&counter::ops_traced, 2);
        let make = |node| TensorInner::new(node, None);
        Tensor(trace::record_scalar_operand(value, shape, location, make))
    }

    /// `op(self, value)`, a binary op with a host scalar of this tensor's dtype and no gradient
    /// recorded: the graph of `self.op(&Tensor::scalar_operand(..))`, recorded at a third of
    /// the cost (the bench's chain is nothing else).
    pub(crate) fn scalar_op(&self, op: Op, value: f64, location: SourceLocation) -> Tensor {
        bump(&counter::ops_traced, 3);
        let make = |node| TensorInner::new(node, None);
        Tensor(trace::record_scalar_op(op, &self.0.value, value, location, make))
    }

    pub(crate) fn from_data(data: Arc<DeviceData>, location: SourceLocation) -> Tensor {
        let shape = Shape::new(data.dtype(), data.dims());
        Tensor(TensorInner::new(Node::new(Op::Data(data), shape, Inputs::new(), location), None))
    }

    pub fn id(&self) -> u64 {
        self.0.value.id
    }

    pub fn shape(&self) -> &Shape {
        &self.0.shape
    }

    pub fn dims(&self) -> &[i64] {
        &self.0.shape.dims
    }

    pub fn dtype(&self) -> DType {
        self.0.shape.dtype
    }

    pub fn rank(&self) -> usize {
        self.0.shape.dims.len()
    }

    pub fn element_count(&self) -> usize {
        self.0.shape.element_count()
    }

    /// The tensor's current IR node.
    pub fn node(&self) -> NodeRef {
        self.0.value.node()
    }

    /// What the user calls this tensor (a parameter's name), where it was given.
    pub fn name(&self) -> Option<&str> {
        self.0.value.name().map(|n| &**n)
    }

    /// Names the tensor (the first name given is kept): findings name a graph input it feeds
    /// by it, and every value a sync computes for it keeps it, so a parameter an optimizer
    /// updates keeps its name from step to step.
    pub fn set_name(&self, name: &str) {
        self.0.value.set_name(Arc::from(name));
    }

    /// This tensor is an in-place write's new value over `old` (a front end that updates a tensor
    /// by giving it a new value, as the torch bridge does): it keeps `old`'s name, and the sync
    /// that computes it takes the buffer `old` holds for it where it may be donated, as
    /// `set_value` does.
    pub fn take_place_of(&self, old: &Tensor) {
        if let Some(name) = old.0.value.name() {
            self.0.value.set_name(name.clone());
        }
        self.0.value.take_place_of(&old.0.value);
    }

    /// True once the value is device data (no pending computation).
    pub fn is_materialized(&self) -> bool {
        self.0.value.is_data()
    }

    /// Updates this tensor in place to `value` (same shape and dtype), the way optimizers update
    /// parameters: every holder of this tensor sees the new value, which is computed at the next
    /// sync. The old value's buffer is donated to the new one when nothing else refers to it.
    #[track_caller]
    pub fn set_value(&self, value: &Tensor) -> Result<()> {
        if value.shape() != self.shape() {
            return Err(crate::Error::Shape {
                op: "set_value",
                message: format!("cannot assign {} to a tensor of {}", value.shape(), self.shape()),
                location: SourceLocation::caller(),
            });
        }
        self.rebind(value);
        Ok(())
    }

    /// Gives this tensor the value of `value` (same shape and dtype: the caller checked).
    pub(crate) fn rebind(&self, value: &Tensor) {
        trace::rebind(&self.0, &value.0.value);
    }

    /// The device data, materializing the tensor first if it is pending.
    #[track_caller]
    pub fn data(&self) -> Result<Arc<DeviceData>> {
        let location = SourceLocation::caller();
        self.data_at(location)
    }

    #[track_caller]
    fn data_at(&self, location: SourceLocation) -> Result<Arc<DeviceData>> {
        if exec::REPLAYED.load(std::sync::atomic::Ordering::Relaxed) {
            // Compiled graphs recorded into the trace: the read computes the whole step, in
            // one program, rather than the part it needs and the rest in another. Also when
            // the value read was computed already (by a capture's sync, in the step that
            // captured a graph): the read is where a step ends, whichever graph ran last.
            exec::sync_all(SyncCause::CompiledGraph, location.clone())?;
            // That sync runs ahead as the compiled graphs' do, but the read needs its end: a
            // program that failed is named here by its graph and line, as a value read's is.
            exec::wait()?;
        }
        if let Op::Data(data) = &self.node().op {
            return Ok(data.clone());
        }
        sync_for_read(&[&self.0.value], location)?;
        match &self.node().op {
            Op::Data(data) => Ok(data.clone()),
            _ => Err(crate::Error::Unsupported(format!(
                "{} was synced but is not device data",
                self.shape()
            ))),
        }
    }

    /// Its node, held weakly: for [`Tensor::needs`], without keeping the node's graph alive
    /// (and, while held, without its address going to another node).
    pub fn node_handle(&self) -> std::sync::Weak<Node> {
        Arc::downgrade(&self.node())
    }

    /// For each node (see [`Tensor::node_handle`]), whether computing this tensor computes it
    /// (a node freed since, or computed since, is not needed).
    pub fn needs(&self, nodes: &[std::sync::Weak<Node>]) -> Result<Vec<bool>> {
        let keys: Vec<usize> = nodes.iter().map(|n| n.as_ptr() as usize).collect();
        let live: Vec<bool> = nodes.iter().map(|n| n.strong_count() > 0).collect();
        let needed = exec::needs(&self.0.value, &keys)?;
        Ok(needed.into_iter().zip(live).map(|(n, l)| n && l).collect())
    }

    /// Computes this pending tensor as reading it does, with `riders` computed by the same
    /// program: what a tool reads beside a value (the index check's bounds) costs no sync of
    /// its own. Nothing to do when it is data, or when compiled graphs were recorded into the
    /// trace (a read then computes the whole step, riders included).
    #[track_caller]
    pub fn compute_with(&self, riders: &[&Tensor]) -> Result<()> {
        let location = SourceLocation::caller();
        if exec::REPLAYED.load(std::sync::atomic::Ordering::Relaxed) || matches!(self.node().op, Op::Data(_)) {
            return Ok(());
        }
        let mut values = vec![&self.0.value];
        values.extend(riders.iter().map(|t| &t.0.value));
        sync_for_read(&values, location)
    }

    /// Reads the values to host (materializing what they need), as `T`, which must be the dtype.
    #[track_caller]
    pub fn to_vec<T: NativeType>(&self) -> Result<Vec<T>> {
        let location = SourceLocation::caller();
        let data = self.data_at(location.clone())?;
        exec::check_sync_allowed("a value was read", &location)?;
        let start = events::now_ns();
        let out = data.to_vec::<T>()?;
        note_value_read(&location, self.shape(), data.size_bytes() as u64, start);
        Ok(out)
    }

    /// Reads the values converted to f64, whatever the dtype.
    #[track_caller]
    pub fn to_f64_vec(&self) -> Result<Vec<f64>> {
        self.read_f64_at(SourceLocation::caller())
    }

    fn read_f64_at(&self, location: SourceLocation) -> Result<Vec<f64>> {
        let data = self.data_at(location.clone())?;
        exec::check_sync_allowed("a value was read", &location)?;
        let start = events::now_ns();
        let bytes = data.to_bytes()?;
        note_value_read(&location, self.shape(), bytes.len() as u64, start);
        Ok(crate::dtype::bytes_to_f64(self.dtype(), &bytes))
    }

    /// The single value of a one-element tensor, as f64.
    #[track_caller]
    pub fn item(&self) -> Result<f64> {
        let location = SourceLocation::caller();
        if self.element_count() != 1 {
            return Err(crate::Error::Shape {
                op: "item",
                message: format!("item() needs a tensor with one element, not {}", self.shape()),
                location,
            });
        }
        self.read_f64_at(location).map(|v| v[0])
    }
}

/// The graph that computing `tensors` would run now, described without compiling, running or
/// reading anything: each node's op, shape and line, and the graph's inputs.
pub fn explain(tensors: &[&Tensor]) -> Result<exec::Explanation> {
    let roots: Vec<_> = tensors.iter().map(|t| t.node()).collect();
    exec::explain(&roots)
}

pub(crate) fn note_transfer(direction: Direction, bytes: u64, start: u64, sync_id: Option<u64>) {
    match direction {
        Direction::ToDevice => bump(&counter::bytes_to_device, bytes),
        Direction::ToHost => bump(&counter::bytes_from_device, bytes),
    }
    if events::enabled() {
        let duration_ns = events::now_ns() - start;
        events::emit(Event::Transfer {
            sync_id: sync_id.unwrap_or(0),
            direction,
            bytes,
            duration_ns,
        });
    }
}

fn note_value_read(location: &SourceLocation, shape: &Shape, bytes: u64, start: u64) {
    bump(&counter::value_reads, 1);
    bump(&counter::bytes_from_device, bytes);
    if events::enabled() {
        events::emit(Event::ValueRead {
            location: location.clone(),
            shape: shape.clone(),
            bytes,
            duration_ns: events::now_ns() - start,
        });
    }
}

impl std::fmt::Debug for Tensor {
    /// Shape, dtype and graph size, without forcing execution.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let node = self.node();
        match node.op {
            Op::Data(_) => write!(f, "Tensor({}, device data", self.shape())?,
            _ => write!(f, "Tensor({}, pending {}", self.shape(), node.op.name())?,
        }
        match &self.0.grad_fn {
            Some(g) => write!(f, ", grad_fn={})", g.name),
            None if self.requires_grad() => write!(f, ", requires_grad)"),
            None => write!(f, ")"),
        }
    }
}

impl std::fmt::Display for Tensor {
    /// The values (this materializes the tensor, like printing in PyTorch/XLA). Formatting
    /// cannot see the line that printed, so the read is located where the tensor was computed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.read_f64_at(self.node().location.clone()) {
            Ok(values) => {
                let shown: Vec<String> = values.iter().take(16).map(|v| format!("{v}")).collect();
                let more = if values.len() > 16 { ", ..." } else { "" };
                write!(f, "tensor({}, [{}{more}])", self.shape(), shown.join(", "))
            }
            Err(e) => write!(f, "tensor({}, <error: {e}>)", self.shape()),
        }
    }
}

/// The sync a value read runs for `values`, then what looks at each sync's results (the
/// anomaly check, the breakpoints).
fn sync_for_read(values: &[&Value], location: SourceLocation) -> Result<()> {
    exec::sync_tensors(values, SyncCause::ValueRead, location)?;
    crate::anomaly::after_sync()?;
    crate::breaks::take()
}
