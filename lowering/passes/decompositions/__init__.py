"""The rewrites of :class:`~lowering.passes.decompose.DecomposeForTosa`, one module per op
family; importing this package registers them (:mod:`lowering.passes.rewrites`)."""

from . import (  # noqa: F401
    activation,
    arith,
    bags_pools,
    batched_linalg,
    compare_count,
    composite,
    creation,
    cumulative,
    distance,
    fold,
    indexing,
    losses,
    lp_pool,
    matmul,
    norm,
    reduce,
    resample,
    rnn,
    scatter_cum,
    scatter_write,
    shape,
    sorting,
    spatial,
    special,
)
