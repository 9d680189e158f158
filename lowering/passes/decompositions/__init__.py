"""The rewrites of :class:`~lowering.passes.decompose.DecomposeForTosa`, one module per op
family; importing this package registers them (:mod:`lowering.passes.rewrites`)."""

from . import (  # noqa: F401
    activation,
    arith,
    bags_pools,
    compare_count,
    composite,
    creation,
    distance,
    fold,
    indexing,
    lp_pool,
    matmul,
    norm,
    reduce,
    resample,
    rnn,
    scatter_cum,
    shape,
    sorting,
    spatial,
    special,
)
