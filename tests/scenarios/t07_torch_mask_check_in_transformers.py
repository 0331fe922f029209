"""torch code on the xlaprof device: a Hugging Face causal LM trained without an attention mask
(and without a cache, as training scripts do).
transformers then checks the position ids for packed sequences (`find_packed_sequence_indices`
in its masking utilities), reading a value from the device in the middle of every forward pass:
a sync inside the library, reported at the user's line that called the model.

Report: https://github.com/huggingface/transformers/pull/41827 (the packed-sequence detection
that https://github.com/huggingface/transformers/pull/39194 added runs on the data when no mask is
given: under torch.compile, no full graph and recompilations; on a lazy device, a sync each step).
"""
# expect: HiddenSync @planted | via masking_utils.py
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import xlaprof.torch as xt

dev = xt.device()
torch.manual_seed(0)
config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32)
model = LlamaForCausalLM(config).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-2)  # no optimizer state: the one cause here is the read
for step in range(4):
    ids = torch.randint(0, 64, (2, 16)).to(dev)
    loss = model(input_ids=ids, labels=ids, use_cache=False).loss  # planted
    loss.backward()
    opt.step()
    opt.zero_grad()
    xt.step()
