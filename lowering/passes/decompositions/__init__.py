"""The rewrites of :class:`~lowering.passes.decompose.DecomposeForTosa`, one module per op
family; importing this package registers them (:mod:`lowering.passes.rewrites`)."""

from . import (  # noqa: F401
    activation,
    arith,
    composite,
    creation,
    distance,
    fold,
    indexing,
    matmul,
    norm,
    reduce,
    rnn,
    shape,
    spatial,
)
