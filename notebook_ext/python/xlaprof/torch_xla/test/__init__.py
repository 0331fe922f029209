"""``torch_xla.test``."""

from .. import _alias

__getattr__ = _alias.not_provided(__name__, ("test_utils",))
