"""``torch_xla.core``."""

from .. import _alias

__getattr__ = _alias.not_provided(__name__, ("xla_model",))
