"""``torch_xla.debug``."""

from .. import _alias

__getattr__ = _alias.not_provided(__name__, ("metrics", "profiler"))
