use std::sync::Arc;
use xlaprof_core::events::{self, Event, Listener};
use xlaprof_core::nn::{Linear, Module, Optimizer, Sgd};
use xlaprof_core::spmd::Mesh;
use xlaprof_core::{engine_with_devices, step, Tensor};
struct Dump;
impl Listener for Dump {
    fn on_event(&self, _: u64, e: &Event) {
        if let Event::Compiled { optimized_hlo: Some(h), hash, .. } = e {
            std::fs::write(format!("/tmp/spmdx/{hash:x}.hlo"), &**h).unwrap();
        }
        if let Event::Lowered { stablehlo, hash, .. } = e {
            std::fs::write(format!("/tmp/spmdx/{hash:x}.mlir"), &**stablehlo).unwrap();
        }
    }
}
fn main() {
    events::add_listener(Arc::new(Dump));
    let n = engine_with_devices(4).unwrap().device_count();
    let mesh = Arc::new(Mesh::new(vec![0, 1, 2, 3], vec![4], vec!["data".into()], n).unwrap());
    let l1 = Linear::new(16, 32, true, 1).unwrap();
    let l2 = Linear::new(32, 4, true, 2).unwrap();
    let params: Vec<Tensor> = l1.parameters().into_iter().chain(l2.parameters()).collect();
    let mut opt = Sgd::new(params.clone(), 0.1);
    let x = Tensor::from_slice(&vec![0.5f32; 8 * 16], &[8, 16]).unwrap();
    x.mark_sharding(&mesh, &[vec!["data".into()], vec![]]).unwrap();
    let y = Tensor::from_slice(&vec![1i64; 8], &[8]).unwrap();
    y.mark_sharding(&mesh, &[vec!["data".into()]]).unwrap();
    let h = l1.forward(&x).unwrap().relu().unwrap();
    // gather h on purpose
    let hg = h.reshape(&[8 * 32]).unwrap();
    let loss = l2
        .forward(&h)
        .unwrap()
        .cross_entropy(&y)
        .unwrap()
        .add(&hg.sum(&[], false).unwrap().mul_scalar(0.0).unwrap())
        .unwrap();
    opt.zero_grad();
    loss.backward().unwrap();
    opt.step().unwrap();
    step().unwrap();
}
