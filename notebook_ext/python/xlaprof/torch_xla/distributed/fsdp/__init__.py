"""``torch_xla.distributed.fsdp``: the wrapping policies FSDPv2 takes
(``torch_xla.experimental.spmd_fully_sharded_data_parallel`` is FSDP over SPMD). PyTorch/XLA's
own FSDP (``XlaFullyShardedDataParallel``, one process per device) is not provided."""

from ... import _alias

__getattr__ = _alias.not_provided(__name__, ("wrap",))
