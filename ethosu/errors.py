"""Errors of the ``ethosu`` package (Vela compilation for Arm Ethos-U).

They derive from :class:`tosa_verify.errors.TosaError`, so the ``tosa-verify`` CLI reports
them like every other deliberate failure (exit code 2, one readable line).
"""

from __future__ import annotations

from collections.abc import Sequence

from tosa_verify.errors import TosaError


class EthosUError(TosaError):
    """Base class of every error the ``ethosu`` package raises on purpose.

    Example:
        >>> issubclass(EthosUError, TosaError)
        True
    """


class EthosUConfigError(EthosUError, ValueError):
    """A target, system config, memory mode, .ini file or Vela flag is not valid.

    Raised before Vela compiles anything. ``option`` names what is wrong (``"target"``,
    ``"system_config"``, ``"memory_mode"``, ``"config_ini"`` or ``"extra_flags"``),
    ``value`` is the rejected value and ``choices`` the values that would be accepted.

    Example:
        >>> err = EthosUConfigError("bad", option="target", value="x", choices=("ethos-u55-128",))
        >>> err.choices
        ('ethos-u55-128',)
    """

    def __init__(
        self,
        message: str,
        *,
        option: str = "",
        value: object = None,
        choices: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.option = option
        self.value = value
        self.choices = tuple(choices)


class VelaCompileError(EthosUError):
    """Vela ran and rejected the network; ``vela_messages`` holds what Vela printed.

    Example:
        >>> VelaCompileError("Vela failed", vela_messages="Error: ...").vela_messages
        'Error: ...'
    """

    def __init__(self, message: str, *, vela_messages: str = "") -> None:
        super().__init__(message)
        self.vela_messages = vela_messages
