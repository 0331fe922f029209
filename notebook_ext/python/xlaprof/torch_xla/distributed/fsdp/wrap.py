"""``torch_xla.distributed.fsdp.wrap``: which submodules FSDPv2 wraps. The policies are torch's
own (``torch.distributed.fsdp.wrap``), which take the same arguments."""

from torch.distributed.fsdp.wrap import (  # noqa: F401  (re-exported)
    _recursive_wrap as recursive_wrap,
    always_wrap_policy,
    lambda_auto_wrap_policy,
    size_based_auto_wrap_policy,
    transformer_auto_wrap_policy,
)

from ... import _alias

__getattr__ = _alias.not_provided(__name__)
