"""The TosaError hierarchy: every failure the library reports on purpose.

Each message is one line and names what broke (operator index, op, tensor, condition),
so a CLI can print it as is and a CI log stays readable.
"""

from __future__ import annotations


class TosaError(Exception):
    """Base class of every error tosa-verify raises deliberately."""


class TosaFormatError(TosaError):
    """The input is not a readable TOSA 1.0 flatbuffer (truncated, corrupt, wrong version)."""


class TosaUnsupportedError(TosaError):
    """The graph uses an operator, dtype or feature the interpreter does not implement."""


class TosaInputError(TosaError):
    """The caller's inputs do not match the graph (count, name, shape or dtype)."""


class TosaSizeError(TosaError):
    """A declared tensor is too large to allocate; raised before any allocation."""


class TosaValidationError(TosaError):
    """A spec ERROR_IF condition (or a REQUIRE) holds: the graph is invalid for TOSA.

    Attributes name the location so tools can point at it without parsing the message.
    """

    def __init__(
        self,
        message: str,
        *,
        op_index: int | None = None,
        op: str | None = None,
        tensors: tuple[str, ...] = (),
        condition: str | None = None,
    ) -> None:
        super().__init__(message)
        self.op_index = op_index
        self.op = op
        self.tensors = tensors
        self.condition = condition


class TosaRequireError(TosaValidationError):
    """A spec REQUIRE failed at run time (data-dependent: the result is unpredictable)."""


class TosaLimitError(TosaError):
    """A run passed a resource budget (control-flow execution budget); see tosa_verify.budget."""
