"""``torch_xla.distributed``."""

from .. import _alias

__getattr__ = _alias.not_provided(__name__, (
    "fsdp", "parallel_loader", "spmd", "xla_backend", "xla_multiprocessing",
))
