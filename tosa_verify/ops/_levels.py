"""Level 8K maxima of the TOSA specification ("Levels" table), in one place.

The interpreter applies level 8K, as the reference model CLI (default ``--tosa_level EIGHTK``) and
tosa-tools' conformance generator do: graphs beyond these limits are rejected with an ERROR_IF.
"""

from __future__ import annotations

MAX_RANK = 6
MAX_KERNEL = 8192
MAX_STRIDE = 8192
MAX_SCALE = 256
MAX_TENSOR_LIST_SIZE = 64
