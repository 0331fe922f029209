"""aten ops lowered onto the engine's ops, one small function each, in one module per op family.

``registry`` holds the tables every lowering registers into (and each op's properties: complex
safety, autocast policy, the native dispatcher's views and operators); ``common`` the helpers the
families share. Importing this package imports every family, which fills the registry.
"""

from . import registry  # noqa: F401
from . import (activations, complex, creation, ctc, cumulative, elementwise, indexing, linalg, movement,  # noqa: F401
               nn, optim, packed, pooling, products, random, reductions, scatter, sort, special, statistics,
               views)
