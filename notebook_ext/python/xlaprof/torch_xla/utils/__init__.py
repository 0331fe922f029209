"""``torch_xla.utils``."""

from .. import _alias

__getattr__ = _alias.not_provided(__name__, ("utils",))
