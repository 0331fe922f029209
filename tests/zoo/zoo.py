"""The model zoo: real architectures from transformers (decoder-only, encoder, encoder-decoder,
vision, audio, mixture-of-experts, state-space) and a ResNet-18 in torch.nn, each at a tiny
config with random init (nothing downloaded), trained with AdamW on the xlaprof device beside
torch's CPU eager.

    .venv/bin/python tests/zoo/zoo.py                 # every model, the table
    .venv/bin/python tests/zoo/zoo.py gpt2 t5 --steps 20
    .venv/bin/python tests/zoo/zoo.py --compiled      # under torch.compile(backend="xlaprof")
    XLAPROF_DEVICE=cuda python tests/zoo/zoo.py --reference cuda    # on a GPU, beside CUDA eager
    .venv/bin/python tests/zoo/zoo.py resnet18 --dtype float64      # both sides in float64

Each model runs in a process of its own (compiles and fallbacks counted for it alone). Its row:
the largest relative loss gap over the steps and the largest parameter gap at the end (both
against torch's eager, dropout off), compiles after the two warm-up steps (the first step's graph,
then the one with the optimizer's state), aten ops that ran on the CPU fallback, the median
step against eager's, and the first step's time (XLA's compiles included). A model is at parity
when the loss gap is under 1e-4, nothing compiles after warm-up and nothing falls back; compiled,
also when every graph was captured (none recorded at each call, which the fallbacks column counts
as "uncaptured").

`--dtype float64` trains both sides in float64 (torch's default dtype too): a model whose float32
training amplifies rounding (ResNet-18's, where CPU eager differs from itself between thread
counts) then tells a wrong lowering, which still shows, from float32's rounding, which no longer
can.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Tuple

HERE = pathlib.Path(__file__).resolve().parent
LOSS_TOLERANCE = 1e-4
# In float64 both sides compute the same math to 1e-16: a gap above this is a wrong lowering.
LOSS_TOLERANCE_F64 = 1e-9

Batch = Dict[str, Any]


# ---- the models ------------------------------------------------------------------------------


def _no_dropout(cfg: Any) -> Any:
    """Every dropout probability of a config at 0 (the CPU and the device draw differently)."""
    for name in list(vars(cfg)):
        value = getattr(cfg, name)
        if isinstance(value, float) and ("dropout" in name or "pdrop" in name or name.endswith("_drop")
                                         or name == "layerdrop" or name == "drop_path_rate"):
            setattr(cfg, name, 0.0)
    return cfg


def _hf(config: str, model: str, **kw: Any) -> Callable[[], Any]:
    def build() -> Any:
        import transformers

        cfg = _no_dropout(getattr(transformers, config)(**kw))
        return getattr(transformers, model)(cfg)

    return build


VOCAB, SEQ, BATCH = 128, 16, 4
_DECODER = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
_ENCODER = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=64)
_VISION = dict(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
               num_attention_heads=4, intermediate_size=64, num_labels=5)


def _lm(g: Any) -> Batch:
    import torch

    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    return {"input_ids": ids, "labels": ids}


def _classify(g: Any) -> Batch:
    import torch

    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1:, SEQ - 5:] = 0  # padded sequences
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.randint(0, 3, (BATCH,), generator=g)}


def _seq2seq(g: Any) -> Batch:
    import torch

    return {"input_ids": torch.randint(2, VOCAB, (BATCH, SEQ), generator=g),
            "labels": torch.randint(2, VOCAB, (BATCH, SEQ // 2), generator=g)}


def _image(g: Any) -> Batch:
    import torch

    return {"pixel_values": torch.randn(BATCH, 3, 32, 32, generator=g),
            "labels": torch.randint(0, 5, (BATCH,), generator=g)}


def _audio(g: Any) -> Batch:
    import torch

    return {"input_values": torch.randn(BATCH, 800, generator=g), "labels": torch.randint(0, 3, (BATCH,), generator=g)}


def _audio_ctc(g: Any) -> Batch:
    """Speech and its transcripts, padded with -100 (the ones transformers ignores) to a fixed
    width: each sequence's length the same every step, so its shapes are."""
    import torch

    labels = torch.randint(1, VOCAB, (BATCH, 8), generator=g)
    lengths = torch.tensor([8, 5, 7, 3])[:BATCH]
    labels[torch.arange(8).unsqueeze(0) >= lengths.unsqueeze(1)] = -100
    return {"input_values": torch.randn(BATCH, 800, generator=g), "labels": labels}


def _whisper(g: Any) -> Batch:
    import torch

    return {"input_features": torch.randn(BATCH, 16, 32, generator=g),
            "labels": torch.randint(2, VOCAB, (BATCH, 8), generator=g)}


def _resnet18() -> Any:
    sys.path.insert(0, str(HERE.parents[1] / "samples" / "torch"))
    from models import ResNet18

    return ResNet18()


def _resnet_batch(g: Any) -> Batch:
    import torch

    return {"x": torch.randn(8, 3, 32, 32, generator=g), "y": torch.randint(0, 10, (8,), generator=g)}


def _hf_loss(model: Any, batch: Batch) -> Any:
    return model(**batch).loss


def _resnet_loss(model: Any, batch: Batch) -> Any:
    import torch

    return torch.nn.functional.cross_entropy(model(batch["x"]), batch["y"])


# name -> (family, build, batch, loss)
MODELS: Dict[str, Tuple[str, Callable[[], Any], Callable[[Any], Batch], Callable[..., Any]]] = {
    "gpt2": ("decoder", _hf("GPT2Config", "GPT2LMHeadModel", vocab_size=VOCAB, n_positions=64, n_embd=32,
                            bos_token_id=0, eos_token_id=0,
                            n_layer=2, n_head=4), _lm, _hf_loss),
    "llama": ("decoder", _hf("LlamaConfig", "LlamaForCausalLM", **_DECODER), _lm, _hf_loss),
    "mistral": ("decoder", _hf("MistralConfig", "MistralForCausalLM", **_DECODER), _lm, _hf_loss),
    "qwen2": ("decoder", _hf("Qwen2Config", "Qwen2ForCausalLM", **_DECODER), _lm, _hf_loss),
    "gemma": ("decoder", _hf("GemmaConfig", "GemmaForCausalLM", head_dim=8, **_DECODER), _lm, _hf_loss),
    "gpt_neox": ("decoder", _hf("GPTNeoXConfig", "GPTNeoXForCausalLM", **{k: v for k, v in _DECODER.items()
                                                                        if k != "num_key_value_heads"}),
                 _lm, _hf_loss),
    "opt": ("decoder", _hf("OPTConfig", "OPTForCausalLM", vocab_size=VOCAB, hidden_size=32, ffn_dim=64,
                           num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64,
                           word_embed_proj_dim=32), _lm, _hf_loss),
    "phi": ("decoder", _hf("PhiConfig", "PhiForCausalLM", **_DECODER), _lm, _hf_loss),
    "bloom": ("decoder", _hf("BloomConfig", "BloomForCausalLM", vocab_size=VOCAB, hidden_size=32, n_layer=2,
                             n_head=4), _lm, _hf_loss),
    "bert": ("encoder", _hf("BertConfig", "BertForSequenceClassification", num_labels=3, **_ENCODER),
             _classify, _hf_loss),
    "roberta": ("encoder", _hf("RobertaConfig", "RobertaForSequenceClassification", num_labels=3, pad_token_id=1,
                               **_ENCODER), _classify, _hf_loss),
    "distilbert": ("encoder", _hf("DistilBertConfig", "DistilBertForSequenceClassification", vocab_size=VOCAB,
                                  dim=32, hidden_dim=64, n_layers=2, n_heads=4, max_position_embeddings=64,
                                  num_labels=3), _classify, _hf_loss),
    "albert": ("encoder", _hf("AlbertConfig", "AlbertForSequenceClassification", embedding_size=16, num_labels=3,
                              **_ENCODER), _classify, _hf_loss),
    "electra": ("encoder", _hf("ElectraConfig", "ElectraForSequenceClassification", embedding_size=16,
                               num_labels=3, **_ENCODER), _classify, _hf_loss),
    "deberta_v2": ("encoder", _hf("DebertaV2Config", "DebertaV2ForSequenceClassification", num_labels=3,
                                  **_ENCODER), _classify, _hf_loss),
    "t5": ("encoder-decoder", _hf("T5Config", "T5ForConditionalGeneration", vocab_size=VOCAB, d_model=32,
                                  d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0),
           _seq2seq, _hf_loss),
    "bart": ("encoder-decoder", _hf("BartConfig", "BartForConditionalGeneration", vocab_size=VOCAB, d_model=32,
                                    encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                    decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                    max_position_embeddings=64), _seq2seq, _hf_loss),
    "vit": ("vision", _hf("ViTConfig", "ViTForImageClassification", **_VISION), _image, _hf_loss),
    "convnext": ("vision", _hf("ConvNextConfig", "ConvNextForImageClassification", num_channels=3,
                               hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_labels=5), _image, _hf_loss),
    "resnet_hf": ("vision", _hf("ResNetConfig", "ResNetForImageClassification", embedding_size=8,
                                hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_labels=5), _image, _hf_loss),
    "swin": ("vision", _hf("SwinConfig", "SwinForImageClassification", image_size=32, patch_size=4, embed_dim=16,
                           depths=[1, 1], num_heads=[2, 4], window_size=4, num_labels=5), _image, _hf_loss),
    "resnet18": ("vision", _resnet18, _resnet_batch, _resnet_loss),
    "wav2vec2": ("audio", _hf("Wav2Vec2Config", "Wav2Vec2ForSequenceClassification", vocab_size=VOCAB,
                              hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                              conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 4),
                              num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, num_labels=3,
                              mask_time_prob=0.0), _audio, _hf_loss),
    "wav2vec2_ctc": ("audio", _hf("Wav2Vec2Config", "Wav2Vec2ForCTC", vocab_size=VOCAB, hidden_size=32,
                                  num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                  conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 4),
                                  num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                                  mask_time_prob=0.0, ctc_loss_reduction="mean"), _audio_ctc, _hf_loss),
    "whisper": ("audio", _hf("WhisperConfig", "WhisperForConditionalGeneration", vocab_size=VOCAB, num_mel_bins=16,
                             d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                             decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                             max_source_positions=16, max_target_positions=32, decoder_start_token_id=1,
                             pad_token_id=0, bos_token_id=1, eos_token_id=1), _whisper, _hf_loss),
    "mixtral": ("mixture-of-experts", _hf("MixtralConfig", "MixtralForCausalLM", num_local_experts=4,
                                          num_experts_per_tok=2, **_DECODER), _lm, _hf_loss),
    "qwen2_moe": ("mixture-of-experts", _hf("Qwen2MoeConfig", "Qwen2MoeForCausalLM", num_experts=4,
                                            num_experts_per_tok=2, moe_intermediate_size=32,
                                            shared_expert_intermediate_size=32, **_DECODER), _lm, _hf_loss),
    "falcon": ("decoder", _hf("FalconConfig", "FalconForCausalLM", vocab_size=VOCAB, hidden_size=32,
                              num_hidden_layers=2, num_attention_heads=4, new_decoder_architecture=True,
                              num_kv_heads=2), _lm, _hf_loss),
    "gptj": ("decoder", _hf("GPTJConfig", "GPTJForCausalLM", vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2,
                            n_head=4, rotary_dim=4), _lm, _hf_loss),
    "gpt_bigcode": ("decoder", _hf("GPTBigCodeConfig", "GPTBigCodeForCausalLM", vocab_size=VOCAB, n_positions=64,
                                   n_embd=32, n_layer=2, n_head=4, multi_query=True), _lm, _hf_loss),
    "codegen": ("decoder", _hf("CodeGenConfig", "CodeGenForCausalLM", vocab_size=VOCAB, n_positions=64, n_ctx=64,
                               n_embd=32, n_layer=2, n_head=4, rotary_dim=4), _lm, _hf_loss),
    "gpt_neo": ("decoder", _hf("GPTNeoConfig", "GPTNeoForCausalLM", vocab_size=VOCAB, max_position_embeddings=64,
                               hidden_size=32, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]],
                               window_size=8), _lm, _hf_loss),
    "stablelm": ("decoder", _hf("StableLmConfig", "StableLmForCausalLM", **_DECODER), _lm, _hf_loss),
    "phi3": ("decoder", _hf("Phi3Config", "Phi3ForCausalLM", pad_token_id=0, **_DECODER), _lm, _hf_loss),
    "gemma2": ("decoder", _hf("Gemma2Config", "Gemma2ForCausalLM", head_dim=8, sliding_window=8, **_DECODER),
               _lm, _hf_loss),
    "qwen3": ("decoder", _hf("Qwen3Config", "Qwen3ForCausalLM", head_dim=8, **_DECODER), _lm, _hf_loss),
    "olmo2": ("decoder", _hf("Olmo2Config", "Olmo2ForCausalLM", pad_token_id=0, **_DECODER), _lm, _hf_loss),
    "cohere": ("decoder", _hf("CohereConfig", "CohereForCausalLM", pad_token_id=0, **_DECODER), _lm, _hf_loss),
    "starcoder2": ("decoder", _hf("Starcoder2Config", "Starcoder2ForCausalLM", **_DECODER), _lm, _hf_loss),
    "mamba": ("state-space", _hf("MambaConfig", "MambaForCausalLM", vocab_size=VOCAB, hidden_size=32,
                                 state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4), _lm, _hf_loss),
    "xlnet": ("encoder", _hf("XLNetConfig", "XLNetForSequenceClassification", vocab_size=VOCAB, d_model=32,
                             n_layer=2, n_head=4, d_inner=64, num_labels=3), _classify, _hf_loss),
    "funnel": ("encoder", _hf("FunnelConfig", "FunnelForSequenceClassification", vocab_size=VOCAB, d_model=32,
                              n_head=4, d_head=8, d_inner=64, block_sizes=[1, 1], num_decoder_layers=1,
                              num_labels=3), _classify, _hf_loss),
    "mobilebert": ("encoder", _hf("MobileBertConfig", "MobileBertForSequenceClassification", vocab_size=VOCAB,
                                  hidden_size=32, embedding_size=16, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=64, intra_bottleneck_size=16, true_hidden_size=16,
                                  num_feedforward_networks=1, max_position_embeddings=64, num_labels=3),
                   _classify, _hf_loss),
    "mpnet": ("encoder", _hf("MPNetConfig", "MPNetForSequenceClassification", num_labels=3, **_ENCODER),
              _classify, _hf_loss),
    "deberta": ("encoder", _hf("DebertaConfig", "DebertaForSequenceClassification", num_labels=3, **_ENCODER),
                _classify, _hf_loss),
    "modernbert": ("encoder", _hf("ModernBertConfig", "ModernBertForSequenceClassification", num_labels=3,
                                  vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, max_position_embeddings=64, local_attention=8,
                                  pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2),
                   _classify, _hf_loss),
    "pegasus": ("encoder-decoder", _hf("PegasusConfig", "PegasusForConditionalGeneration", vocab_size=VOCAB,
                                       d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                       decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                       max_position_embeddings=64), _seq2seq, _hf_loss),
    "mbart": ("encoder-decoder", _hf("MBartConfig", "MBartForConditionalGeneration", vocab_size=VOCAB, d_model=32,
                                     encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                     decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                                     max_position_embeddings=64), _seq2seq, _hf_loss),
    "switch": ("mixture-of-experts", _hf("SwitchTransformersConfig", "SwitchTransformersForConditionalGeneration",
                                         vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                         num_decoder_layers=2, num_heads=4, num_experts=4, decoder_start_token_id=0,
                                         router_jitter_noise=0.0), _seq2seq, _hf_loss),
    "deit": ("vision", _hf("DeiTConfig", "DeiTForImageClassification", **_VISION), _image, _hf_loss),
    "beit": ("vision", _hf("BeitConfig", "BeitForImageClassification", use_relative_position_bias=True,
                           **_VISION), _image, _hf_loss),
    "dinov2": ("vision", _hf("Dinov2Config", "Dinov2ForImageClassification", **_VISION), _image, _hf_loss),
    "segformer": ("vision", _hf("SegformerConfig", "SegformerForImageClassification", num_channels=3,
                                num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                                patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
                                mlp_ratios=[2, 2], num_labels=5), _image, _hf_loss),
    "mobilevit": ("vision", _hf("MobileViTConfig", "MobileViTForImageClassification", image_size=32, patch_size=2,
                                hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32],
                                num_attention_heads=2, num_labels=5), _image, _hf_loss),
    "regnet": ("vision", _hf("RegNetConfig", "RegNetForImageClassification", embedding_size=8,
                             hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], groups_width=8, num_labels=5),
               _image, _hf_loss),
    "efficientnet": ("vision", _hf("EfficientNetConfig", "EfficientNetForImageClassification", image_size=32,
                                   width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320, num_labels=5),
                     _image, _hf_loss),
    "convnextv2": ("vision", _hf("ConvNextV2Config", "ConvNextV2ForImageClassification", num_channels=3,
                                 hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_labels=5), _image, _hf_loss),
    "hubert": ("audio", _hf("HubertConfig", "HubertForSequenceClassification", vocab_size=VOCAB,
                            hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                            conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 4),
                            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, num_labels=3,
                            mask_time_prob=0.0), _audio, _hf_loss),
    "wavlm": ("audio", _hf("WavLMConfig", "WavLMForSequenceClassification", vocab_size=VOCAB,
                           hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                           conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 4),
                           num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, num_labels=3,
                           mask_time_prob=0.0, num_buckets=16, max_bucket_distance=32), _audio, _hf_loss),
}


# ---- one model -----------------------------------------------------------------------------


def train(name: str, model: Any, device: Any, steps: int, end_step: Callable[[], None] = lambda: None,
          backend: str = "", dtype: str = "float32", seed: int = 0) -> Iterator[Tuple[float, float]]:
    """Trains ``model`` (``name``'s, on ``device``) ``steps`` AdamW steps on the zoo's batches
    (the same in every process for one ``seed``): each step's loss and its time. With
    ``backend``, the model and the optimizer's step run under ``torch.compile(backend=backend)``,
    as PyTorch recommends."""
    import torch

    _, _, make_batch, loss_of = MODELS[name]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    forward, opt_step = model, opt.step
    if backend:
        forward = torch.compile(model, backend=backend)
        opt_step = torch.compile(opt.step, backend=backend)
    g = torch.Generator().manual_seed(1 + seed)
    for _ in range(steps):
        batch = {k: v.to(getattr(torch, dtype)) if v.is_floating_point() else v for k, v in make_batch(g).items()}
        start = time.perf_counter()
        loss = loss_of(forward, {k: v.to(device) for k, v in batch.items()})
        loss.backward()
        opt_step()
        opt.zero_grad()
        end_step()
        value = loss.item()
        yield value, time.perf_counter() - start


def train_eager(name: str, steps: int, device: str, dtype: str = "float32", seed: int = 0) -> Dict[str, Any]:
    """Trains ``name`` in torch's eager on ``device``, its weights drawn with ``seed``: each
    step's loss and time, the parameters at the end (on the CPU), and how many there are."""
    import torch

    if device == "cuda":
        # f32 against f32: torch's cuDNN convolutions default to TF32, the engine's are f32.
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(seed)
    model = MODELS[name][1]().to(device, getattr(torch, dtype))
    losses, times = zip(*train(name, model, device, steps, dtype=dtype, seed=seed))
    return {"losses": list(losses), "times": list(times), "count": len(list(model.parameters())),
            "params": [p.detach().cpu() for p in model.parameters()]}


def train_eager_elsewhere(name: str, steps: int, device: str, dtype: str = "float32") -> Dict[str, Any]:
    """`train_eager` in a process that never imports xlaprof: once a PrivateUse1 device is
    registered, torch's autograd engine cannot run a CUDA backward (pytorch/pytorch#161129)."""
    import tempfile

    import torch

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "eager.pt")
        cmd = [sys.executable, __file__, "--eager-only", out, "--one", name, "--steps", str(steps),
               "--reference", device, "--dtype", dtype]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode:
            raise RuntimeError(f"eager on {device}: " + (run.stderr.strip().splitlines() or ["?"])[-1])
        return torch.load(out)


def run_one(name: str, steps: int, reference: str = "cpu", compiled: bool = False,
            dtype: str = "float32") -> Dict[str, Any]:
    """Trains ``name`` in torch's eager on ``reference`` ("cpu", or "cuda" beside the engine on a
    CUDA plugin), then on the device, step by step (lazily, or with ``compiled`` under
    ``torch.compile(backend="xlaprof")``); its row of the table."""
    import torch

    import xlaprof as xp
    import xlaprof.torch as xt  # before any backward(): torch's autograd engine must know the device

    # Eager first: after the device's steps, torch's CPU kernels run slower in the same process.
    ref = (train_eager(name, steps, "cpu", dtype) if reference == "cpu"
           else train_eager_elsewhere(name, steps, reference, dtype))

    family, build, _, _ = MODELS[name]
    torch.manual_seed(0)
    lazy = build().to(xt.device(), getattr(torch, dtype))
    gaps, times, compiles = [], [], []
    end_step = (lambda: None) if compiled else xt.step
    backend = "xlaprof" if compiled else ""
    for (ours, took), expected in zip(train(name, lazy, xt.device(), steps, end_step, backend, dtype), ref["losses"]):
        times.append(took)
        compiles.append(xp.counters()["compiles"])
        gaps.append(abs(ours - expected) / max(abs(expected), 1e-12))
    # The largest difference of any parameter element, relative to the largest element of the
    # model (per parameter, a bias whose true gradient is zero, such as attention's key bias,
    # moves by AdamW's lr times the sign of rounding noise, on either side).
    diff = scale = 0.0
    with torch.no_grad():
        for p, q in zip(ref["params"], lazy.parameters()):
            diff = max(diff, (q.cpu() - p).abs().max().item())
            scale = max(scale, p.abs().max().item())
    param_gap = diff / max(scale, 1e-12)
    eager_times = ref["times"]
    row = {
        "model": name, "family": family, "steps": steps, "dtype": dtype, "parameters": (ref["count"], len(list(lazy.parameters()))),
        "loss_gap": max(gaps), "param_gap": param_gap,
        "compiles_after_warmup": compiles[-1] - compiles[min(1, steps - 1)],
        "fallbacks": sorted(xt.fallbacks()),
        "step_ms": statistics.median(times[2:] or times) * 1e3,
        "eager_ms": statistics.median(eager_times[2:] or eager_times) * 1e3,
        "first_step_s": times[0],
    }
    if compiled:
        from xlaprof.torch import _compile

        # Graphs recorded at every call for want of a capture: a slow path, as a fallback is.
        row["uncaptured"] = _compile.stats()["uncaptured"]
    return row


def at_parity(row: Dict[str, Any]) -> bool:
    tolerance = LOSS_TOLERANCE_F64 if row.get("dtype") == "float64" else LOSS_TOLERANCE
    return ("error" not in row and row["loss_gap"] < tolerance and row["compiles_after_warmup"] == 0
            and not row["fallbacks"] and row["parameters"][0] == row["parameters"][1]
            and not row.get("uncaptured"))


def measure(names: List[str], steps: int, timeout: float = 600, reference: str = "cpu",
            compiled: bool = False, dtype: str = "float32") -> Iterator[Dict[str, Any]]:
    """Each model in a process of its own: its row, or the error that stopped it."""
    for name in names:
        cmd = [sys.executable, __file__, "--one", name, "--steps", str(steps), "--reference", reference]
        cmd += (["--compiled"] if compiled else []) + ["--dtype", dtype]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                 env={**os.environ, "PYTHONWARNINGS": "ignore"})
        except subprocess.TimeoutExpired:
            yield {"model": name, "family": MODELS[name][0], "error": f"timed out after {timeout:.0f} s"}
            continue
        lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
        if run.returncode == 0 and lines:
            yield json.loads(lines[-1])
        else:
            last = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
            yield {"model": name, "family": MODELS[name][0], "error": last[:160]}


HEADER = (f"{'model':<11} {'family':<19} {'loss gap':>9} {'param gap':>9} {'compiles':>8} {'fallbacks':<14} "
          f"{'step ms':>8} {'eager ms':>8} {'vs eager':>8} {'first s':>7}  parity")


def row(r: Dict[str, Any]) -> str:
    if "error" in r:
        return f"{r['model']:<11} {r['family']:<19} error: {r['error']}"
    fallbacks = ",".join(r["fallbacks"]) or "none"
    if r.get("uncaptured"):
        fallbacks = f"{r['uncaptured']} uncaptured," + fallbacks
    return (f"{r['model']:<11} {r['family']:<19} {r['loss_gap']:>9.1e} {r['param_gap']:>9.1e} "
            f"{r['compiles_after_warmup']:>8} {fallbacks[:14]:<14} {r['step_ms']:>8.1f} {r['eager_ms']:>8.1f} "
            f"{r['step_ms'] / r['eager_ms']:>7.2f}x {r['first_step_s']:>7.1f}  {'yes' if at_parity(r) else 'NO'}")


def summary(rows: List[Dict[str, Any]]) -> str:
    f64 = any(r.get("dtype") == "float64" for r in rows)
    return (f"{sum(at_parity(r) for r in rows)} of {len(rows)} models at parity "
            f"(loss gap < {LOSS_TOLERANCE_F64 if f64 else LOSS_TOLERANCE:g}{' in float64' if f64 else ''}, "
            f"no compile after warm-up, no fallback, every compiled graph captured)")


def table(rows: List[Dict[str, Any]]) -> str:
    return "\n".join([HEADER, "-" * len(HEADER)] + [row(r) for r in rows] + [summary(rows)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help=f"any of: {' '.join(MODELS)}")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reference", choices=("cpu", "cuda"), default="cpu",
                    help="where torch's eager runs beside the engine (cuda: with XLAPROF_DEVICE=cuda)")
    ap.add_argument("--compiled", action="store_true",
                    help='the model and the optimizer step under torch.compile(backend="xlaprof")')
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                    help="the parameters' and inputs' dtype on both sides")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--eager-only", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.dtype == "float64":
        import torch

        # Also the optimizers' step counts: a compiled optimizer step computes its bias
        # corrections in that tensor's dtype, where eager computes them in Python floats.
        torch.set_default_dtype(torch.float64)
    if args.eager_only:
        import torch

        torch.save(train_eager(args.one, args.steps, args.reference, args.dtype), args.eager_only)
        return
    if args.one:
        print(json.dumps(run_one(args.one, args.steps, args.reference, args.compiled, args.dtype)))
        return
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        ap.error(f"unknown models {unknown}; the zoo has: {' '.join(MODELS)}")
    print(HEADER + "\n" + "-" * len(HEADER), flush=True)
    rows = []
    for r in measure(args.models or list(MODELS), args.steps, reference=args.reference, compiled=args.compiled,
                     dtype=args.dtype):
        rows.append(r)
        print(row(r), flush=True)
    print(summary(rows))


if __name__ == "__main__":
    main()
