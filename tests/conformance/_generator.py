"""tosa-tools' test generator (``tosa_verif_build_tests``), with each JSON schema checked once.

The generator validates every ``desc.json`` and data-generation config it writes with
``jsonschema.validate``, which first checks the *schema itself* against the JSON Schema
meta-schema, on every call: about 80% of the generator's CPU time (cProfile of one MUL
generation: 63 of 74 s in ``check_schema``). Here the meta-schema check runs once per distinct
schema; every config is still validated against its schema exactly as before, and the cases
written are the same bytes. Run as ``python tests/conformance/_generator.py ARGS`` (the
generator's own arguments).
"""

from __future__ import annotations

import copy
import enum
import json
import os
import sys

import numpy as np
from jsonschema import exceptions, validators

_CHECKED: set[str] = set()


def validate(instance, schema, cls=None, *args, **kwargs) -> None:
    """``jsonschema.validate`` with the meta-schema check of ``schema`` done once per schema.

    >>> validate({"a": 1}, {"type": "object"})
    """
    if cls is None:
        cls = validators.validator_for(schema)
    key = json.dumps(schema, sort_keys=True)
    if key not in _CHECKED:
        cls.check_schema(schema)
        _CHECKED.add(key)
    error = exceptions.best_match(cls(schema, *args, **kwargs).iter_errors(instance))
    if error is not None:
        raise error


_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None), np.generic, enum.Enum, type, range)


def fast_deepcopy(value, memo: dict | None = None):
    """``copy.deepcopy`` for the generator's argument dicts: plain containers copied in Python
    without deepcopy's reduce protocol, anything else handed to ``copy.deepcopy``.

    The generator deep-copies each case's argument dict for every test-data variant: about half
    of its CPU time for CONV2D. The copy has the same structure, the same aliasing (memo) and
    equal values; immutable leaves (numbers, strings, numpy scalars, enums) are shared instead
    of rebuilt, which nobody can observe. The written cases are the same bytes (a test checks).

    >>> a = {"k": [1, (2, [3])], "e": set()}; b = fast_deepcopy(a)
    >>> b == a and b["k"] is not a["k"] and b["k"][1][1] is not a["k"][1][1]
    True
    """
    if isinstance(value, _IMMUTABLE):
        return value
    if memo is None:
        memo = {}
    found = memo.get(id(value))
    if found is not None:
        return found
    kind = type(value)
    if kind is dict:
        copied = memo[id(value)] = {}
        for key, item in value.items():
            copied[fast_deepcopy(key, memo)] = fast_deepcopy(item, memo)
    elif kind is list:
        copied = memo[id(value)] = []
        copied.extend(fast_deepcopy(item, memo) for item in value)
    elif kind is tuple:
        copied = memo[id(value)] = tuple(fast_deepcopy(item, memo) for item in value)
    elif kind is set:
        copied = memo[id(value)] = {fast_deepcopy(item, memo) for item in value}
    else:
        copied = memo[id(value)] = copy.deepcopy(value)
    return copied


if __name__ == "__main__":
    from generator import tosa_arg_gen
    from schemavalidation import schemavalidation

    schemavalidation.validate = validate  # the name the generator's validator calls
    if os.environ.get("TOSA_VERIFY_GENERATOR_PLAIN_DEEPCOPY") != "1":  # the test's reference run
        tosa_arg_gen.deepcopy = fast_deepcopy
    from generator.tosa_verif_build_tests import main

    sys.exit(main())
