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

import json
import sys

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


if __name__ == "__main__":
    from schemavalidation import schemavalidation

    schemavalidation.validate = validate  # the name the generator's validator calls
    from generator.tosa_verif_build_tests import main

    sys.exit(main())
