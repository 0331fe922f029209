#!/usr/bin/env bash
# The engine on a GPU: the engine's tests, the samples, the demo and `xlaprof bench` (with JAX's
# and PyTorch's figures beside ours when they are installed), against a CUDA PJRT plugin; and,
# where the Python given has torch with CUDA and transformers, PyTorch on the GPU: the torch
# bridge's parity with CUDA eager, GPT-2 lazy against CUDA eager and inductor, and the OpInfo
# sweep on the GPU (notebook_ext/bench/torch_gpu.py, tests/opinfo/opinfo_sweep.py), with the
# xlaprof wheel for that Python (packed, or built here).
# CI has no GPU and does not run this; run it on a machine with an NVIDIA GPU and a CUDA plugin
# (`XLAPROF_PJRT_PLUGIN=/path/to/plugin.so`, or one installed where `XLAPROF_DEVICE=cuda` finds it:
# `pip install xla-cuda13-pjrt`, or JAX's `jax-cuda13-pjrt`).
#
#   bash scripts/test_gpu.sh                  build with cargo, then run everything
#   bash scripts/test_gpu.sh --pack DIR       build, and copy the binaries the run needs into DIR,
#                                             with the wheels for CPython 3.10-3.13
#   bash scripts/test_gpu.sh --prebuilt DIR   run binaries packed elsewhere (a GPU machine without
#                                             a Rust toolchain, same processor and a newer libc)
# Options: --python PY (a Python with jax and torch, for the figures beside ours; default python3),
#          --peers DIR (JAX's peer benchmarks, bench_b_chain.py and bench_c_mlp.py),
#          --only engine|torch (one half: the engine's tests, samples and bench, or PyTorch),
#          --out DIR (keep the torch half's figures, logs and GPT-2 profiles there).
# The torch half times GPT-2 alone first, then runs the zoo's parity and the OpInfo sweeps side
# by side (their timings are not the point; the GPU's time is scarce).
# Exits non-zero when there is no GPU (nothing is run) and when anything fails.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
say() { printf '[test-gpu] %s\n' "$*"; }

mode=build prebuilt="" pack="" python=python3 peers="" only="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --pack) mode=pack pack="$2"; shift 2 ;;
    --prebuilt) mode=prebuilt prebuilt="$(cd "$2" && pwd)"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --peers) peers="$(cd "$2" && pwd)"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) say "unknown argument: $1"; exit 2 ;;
  esac
done

# The engine's test targets that hold on one GPU. Left out: `spmd` (it asks the CPU plugin for
# four devices) and `plugins` (it checks how the CPU plugin is chosen and started).
core_tests=(runtime engine_smoke cache errors gradcheck layers ops_reference threads config run_ahead)
# Tests of the CPU plugin's own devices (four by default, two on request), not of a GPU's.
cpu_only=(client_reports_platform_and_four_default_cpu_devices
          host_data_that_does_not_fill_the_shape_is_an_error
          two_clients_live_side_by_side_and_one_has_two_devices)
samples=(mlp_train cnn_train transformer_block recompile_demo)

# --- build (and pack) -------------------------------------------------------------------------
if [ "$mode" != prebuilt ]; then
  command -v cargo >/dev/null || { say "cargo not found: build elsewhere with --pack, run with --prebuilt"; exit 2; }
  bash scripts/setup.sh >/dev/null || exit 1
  say "building (release)"
  listing="$(mktemp)"
  cargo build --release --workspace --tests --bins --examples --message-format=json >"$listing" || exit 1
  prebuilt="$root/target/gpu-bin"
  rm -rf "$prebuilt" && mkdir -p "$prebuilt/tests" "$prebuilt/bin"
  # The test binaries' names carry a hash: copy the ones we run under their target's name.
  BINS="xlaprof out_of_memory ${samples[*]}" python3 - "$listing" "$prebuilt" "${core_tests[@]}" <<'EOF'
import json, os, shutil, sys
listing, out, wanted = sys.argv[1], sys.argv[2], set(sys.argv[3:])
bins = set(os.environ["BINS"].split())
for line in open(listing):
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    t, test = m["target"], m["profile"]["test"]
    if test and t["name"] in wanted and "xlaprof-core" in m["package_id"]:
        shutil.copy(m["executable"], f"{out}/tests/{t['name']}")
    elif not test and t["name"] in bins and ("bin" in t["kind"] or "example" in t["kind"]):
        shutil.copy(m["executable"], f"{out}/bin/{t['name']}")
EOF
  rm -f "$listing"
  # Tests find their crate's files through the path they were built in; a packed run links it.
  echo "$root" >"$prebuilt/built-in"
  if [ "$mode" = pack ]; then
    mkdir -p "$pack" && cp -r "$prebuilt"/. "$pack"/
    command -v strip >/dev/null && strip "$pack"/tests/* "$pack"/bin/* 2>/dev/null
    bash scripts/build_wheels.sh --out "$pack/wheels" || exit 1
    # The OpInfo database imports expecttest, which a GPU machine's torch may lack.
    python3 -m pip download -q --disable-pip-version-check --no-deps -d "$pack/wheels/extra" expecttest || exit 1
    say "packed into $pack ($(du -sh "$pack" | cut -f1)); run: bash scripts/test_gpu.sh --prebuilt $pack"
    exit 0
  fi
fi

# --- is there a GPU? --------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null || ! gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)" || [ -z "$gpu" ]; then
  say "no NVIDIA GPU here (nvidia-smi finds none): nothing was run"
  exit 3
fi
say "GPU: $gpu"
export XLAPROF_DEVICE=cuda
if [ -n "${XLAPROF_PJRT_PLUGIN:-}" ]; then say "plugin: $XLAPROF_PJRT_PLUGIN"; fi

built_in="$(cat "$prebuilt/built-in" 2>/dev/null || true)"
if [ -n "$built_in" ] && [ "$built_in" != "$root" ] && [ ! -e "$built_in" ]; then
  mkdir -p "$(dirname "$built_in")" 2>/dev/null && ln -s "$root" "$built_in" 2>/dev/null \
    || say "tests that read their crate's files may fail: $built_in is not this checkout"
fi

failed=()
run_step() { # name, command...
  local name="$1"; shift
  say "── $name"
  if "$@"; then say "ok: $name"; else say "FAILED: $name"; failed+=("$name"); fi
}

work="$(mktemp -d)"
if [ "$only" != torch ]; then
  # --- the engine's tests ---------------------------------------------------------------------
  skips="$(printf -- ' --skip %s' "${cpu_only[@]}")"
  say "left out, as they test the CPU plugin's devices:${cpu_only[*]/#/ }"
  for t in "${core_tests[@]}"; do
    run_step "core test $t" bash -c "cd core && '$prebuilt/tests/$t' -q --exact $skips 2>&1 | tail -n 25; exit \${PIPESTATUS[0]}"
  done

  # --- the samples and the demo ---------------------------------------------------------------
  for s in "${samples[@]}"; do
    run_step "sample $s" bash -c "cd '$work' && XLAPROF_PROFILE='$work/$s.xlaprof' '$prebuilt/bin/$s' 2>&1 | tail -n 6; exit \${PIPESTATUS[0]}"
    run_step "report of $s" bash -c "'$prebuilt/bin/xlaprof' report '$work/$s.xlaprof' | head -n 40"
  done
  run_step "out of device memory is a clear error" bash -c "'$prebuilt/bin/out_of_memory' 1024"
  run_step "demo" bash -c "cd '$work' && '$prebuilt/bin/xlaprof' demo --out '$work/demo.xlaprof' | tail -n 30; exit \${PIPESTATUS[0]}"

  # --- figures --------------------------------------------------------------------------------
  bench_args=(bench --json)
  if [ -n "$peers" ] && "$python" -c 'import jax' 2>/dev/null; then
    bench_args+=(--jax-python "$python" --jax-peers "$peers")
  fi
  run_step "xlaprof bench" bash -c "'$prebuilt/bin/xlaprof' ${bench_args[*]}"
  if "$python" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    run_step "PyTorch on the same GPU" "$python" scripts/bench_torch_mlp.py 30
  fi
fi

# --- PyTorch on the GPU -------------------------------------------------------------------------
torch_part() {
  tag="$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
  wheel="$(ls "$prebuilt"/wheels/xlaprof-*-"$tag"-*.whl 2>/dev/null | head -n 1)"
  if [ -z "$wheel" ] && [ "$mode" = build ]; then
    bash scripts/build_wheels.sh --out "$prebuilt/wheels" "$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" >/dev/null
    wheel="$(ls "$prebuilt"/wheels/xlaprof-*-"$tag"-*.whl 2>/dev/null | head -n 1)"
  fi
  if [ -z "$wheel" ]; then
    say "no xlaprof wheel for $tag in $prebuilt/wheels: PyTorch on the GPU was not run"
    failed+=("torch on the GPU (no wheel)")
    return
  fi
  # Beside the Python's own packages: its torch, transformers and the CUDA plugin stay.
  "$python" -m pip install -q --disable-pip-version-check --no-deps --no-index --target "$work/site" \
    "$wheel" "$prebuilt"/wheels/extra/*.whl 2>/dev/null || "$python" -m pip install -q --no-deps --target "$work/site" "$wheel"
  export PYTHONPATH="$work/site${PYTHONPATH:+:$PYTHONPATH}"
  local dir="${out:-$work/torch}"
  mkdir -p "$dir"
  run_step "f32 products on the GPU: the engine's against CUDA eager's, TF32 off and on" \
    "$python" notebook_ext/bench/gpu_precision.py
  # The engine writes depthwise convolutions as sums over their taps; on a GPU, JAX's row is
  # XLA's convolution (cuDNN's), the one to beat.
  run_step "depthwise convolutions on the GPU: the engine's taps against XLA's convolution (JAX)" \
    "$python" notebook_ext/bench/depthwise.py --jax "$python"
  # The recurrences are loops in the engine's program; CUDA eager runs cuDNN's fused RNNs.
  run_step "recurrent layers and the CTC loss on the GPU, beside CUDA eager" \
    "$python" scripts/bench_recurrences.py --peer cuda
  run_step "torch bridge on the GPU: host cost; GPT-2 eager, inductor, lazy, compiled and fused" \
    "$python" notebook_ext/bench/torch_gpu.py --skip parity --out "$dir"
  # An AdamW step alone over GPT-2's worth of parameters (113M): donation and each path's host cost.
  run_step "AdamW step on the GPU: CUDA eager, lazy, compiled and JAX" \
    "$python" notebook_ext/bench/optimizer_step.py --layers 12 --width 3072 --jax "$python"
  # Side by side: each writes its log, shown in order once all have ended.
  local names=(parity opinfo-float32 opinfo-bfloat16) pids=() i
  "$python" notebook_ext/bench/torch_gpu.py --skip host gpt2 >"$dir/parity.log" 2>&1 &
  pids+=($!)
  for dtype in float32 bfloat16; do
    "$python" tests/opinfo/opinfo_sweep.py --samples 1 --dtype "$dtype" --verbose >"$dir/opinfo-$dtype.log" 2>&1 &
    pids+=($!)
  done
  local status
  for i in 0 1 2; do
    wait "${pids[$i]}"
    status=$?
    run_step "${names[$i]} on the GPU" bash -c "cat '$dir/${names[$i]}.log'; exit $status"
  done
}
if [ "$only" != engine ]; then
  if "$python" -c 'import torch, transformers, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
    torch_part
  else
    say "$python has no torch with CUDA, or no transformers: PyTorch on the GPU was not run"
    failed+=("torch on the GPU (no torch with CUDA)")
  fi
fi
rm -rf "$work"

if [ ${#failed[@]} -gt 0 ]; then
  say "failed: ${failed[*]}"
  exit 1
fi
say "everything passed on $gpu"
