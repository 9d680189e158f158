"""The application layer: the verbs that join the core with ``lowering``, ``ethosu``, ``vgf`` and
``golden`` (``check``, ``eval``, the model loading they share, their arguments).

The core of ``tosa_verify`` (graph, dtypes, numerics, errors, interpreter, ops, compare,
reference, diff, drift, evaluate, ...) never imports this package nor those four; modules here
import them at module level. ``tosa_verify/cli.py``, ``check.py``, ``eval_cli.py`` and
``report.py`` belong to this layer too (kept at their paths: the console script and public
imports name them). See ``docs/ARCHITECTURE.md``.
"""
