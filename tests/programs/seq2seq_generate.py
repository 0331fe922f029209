"""A sequence-to-sequence model fine-tuned in the manner of Hugging Face's summarization and
translation examples (`run_summarization_no_trainer.py`): a small T5 (random init), AdamW, source
and target padded to fixed lengths with the padding of the labels set to -100, and after each
epoch `model.generate()` on a held-out batch, decoded token by token.

    python seq2seq_generate.py --mode lazy|inductor|xlaprof

An expert reading its profile, run lazily: training is one graph per step after AdamW's state
(warm-up, once), but T5's attention-mask check (transformers' `masking_utils`) reads the mask
on the host in every forward. `generate()` grows the decoder's sequence one token at a time, so
each length is a graph of its own: a storm of compiles at the `generate` call, to be fixed with
a static cache (`cache_implementation="static"`) or by padding the decoder input; its stopping
check reads every token on the host, and its setup reads the special tokens and the logits
processors' settings once per call. The generation after the last step is a read after the
loop, not a hidden sync. Under torch.compile only the training forward is compiled (`generate`
runs the model uncompiled), once.
"""
# expect[all]: steps 8
# expect[lazy]: LazyState @step_end
# expect[lazy]: RecompileStorm @generate_call | grows step by step | static cache
# expect[lazy]: HiddenSync @generate_call | StopCheck
# expect[lazy]: HiddenSync @generate_call | _prepare_special_tokens
# expect[lazy]: HiddenSync @generate_call | _get_logits_processor
# expect[lazy]: HiddenSync @generate_call | masking_utils.py
# expect[lazy]: HiddenSync @train_call | masking_utils.py
import argparse

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["lazy", "inductor", "xlaprof"], default="lazy")
mode = ap.parse_args().mode

import torch  # noqa: E402
from transformers import T5Config, T5ForConditionalGeneration  # noqa: E402

if mode == "lazy":
    import xlaprof.torch as xt

    device = xt.device()
else:
    device = torch.device("cpu")

num_epochs, steps_per_epoch, batch_size = 2, 4, 4
max_source_length, max_target_length, vocab = 16, 8, 64
pad, eos = 0, 1

torch.manual_seed(0)
config = T5Config(vocab_size=vocab, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                  num_heads=4, dropout_rate=0.0, decoder_start_token_id=pad, pad_token_id=pad,
                  eos_token_id=eos)
model = T5ForConditionalGeneration(config).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
train_model = model if mode == "lazy" else torch.compile(model, **({"backend": "xlaprof"} if mode == "xlaprof" else {}))


def batch(seed):
    """Source ids padded to `max_source_length`; labels padded to `max_target_length` with -100."""
    g = torch.Generator().manual_seed(seed)
    src = torch.full((batch_size, max_source_length), pad)
    labels = torch.full((batch_size, max_target_length), -100)
    for i in range(batch_size):
        n = int(torch.randint(4, max_source_length, (), generator=g))
        src[i, :n] = torch.randint(2, vocab, (n,), generator=g)
        m = int(torch.randint(2, max_target_length, (), generator=g))
        labels[i, :m] = src[i, :m].flip(0)
        labels[i, m - 1] = eos
    return src.to(device), (src != pad).long().to(device), labels.to(device)


held_out = batch(1000)
for epoch in range(num_epochs):
    model.train()
    for step in range(steps_per_epoch):
        input_ids, attention_mask, labels = batch(epoch * steps_per_epoch + step)
        loss = train_model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss  # train_call
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if mode == "lazy":
            xt.step()  # step_end
    model.eval()
    with torch.no_grad():
        generated = model.generate(input_ids=held_out[0], attention_mask=held_out[1], max_new_tokens=6)  # generate_call
    print(f"epoch {epoch}: loss {loss.item():.4f}, generated {generated.shape[1]} tokens: {generated[0].tolist()}")
