"""Ethos-U targets, Vela system configs and memory modes: discovery and validation.

Section names come from Vela's own ``vela.ini`` (shipped inside the installed ``ethos-u-vela``
package, ``ethosu/config_files/Arm/vela.ini``) and from an optional user ``.ini``, both read
with :mod:`configparser`. A combination is checked before anything is compiled:

* the target must be one of Vela's accelerator configurations;
* the system config and the memory mode must be sections of the .ini files;
* a system config named for another Ethos-U family (``Ethos_U85_...`` on an Ethos-U55) is
  refused; names without a family prefix (user configs) suit every family;
* Ethos-U55 has no dedicated-SRAM mode: memory modes whose arena is not in the cache SRAM
  (``Dedicated_Sram*``) are refused for it;
* Vela's own configuration checks (``ArchitectureFeatures``: each memory area on a port of
  the right kind, arena cache size in range) must pass.

Every refusal is an :class:`~ethosu.errors.EthosUConfigError` listing the valid choices.
"""

from __future__ import annotations

import configparser
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from ethosu.vela import architecture_features as _vela_arch
from ethosu.vela.errors import VelaError

from ethosu._capture import capture_output
from ethosu.errors import EthosUConfigError

#: Vela's accelerator configurations, in Vela's order.
TARGETS: tuple[str, ...] = tuple(_vela_arch.Accelerator.member_list())

#: Default (system config, memory mode) per family; the same defaults ExecuTorch's
#: ``EthosUCompileSpec`` uses, so both flows compile identically by default.
FAMILY_DEFAULTS: dict[str, tuple[str, str]] = {
    "ethos-u55": ("Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "ethos-u65": ("Ethos_U65_High_End", "Dedicated_Sram_384KB"),
    "ethos-u85": ("Ethos_U85_SYS_DRAM_Mid", "Sram_Only"),
}

_SYSTEM_PREFIX = "System_Config."
_MEMORY_PREFIX = "Memory_Mode."
_FAMILY_IN_NAME = re.compile(r"^Ethos_U(\d\d)_", re.IGNORECASE)


def vela_ini_path() -> Path:
    """The ``vela.ini`` that ships with the installed Vela.

    Example:
        >>> vela_ini_path().name
        'vela.ini'
    """
    return Path(_vela_arch.CONFIG_FILES_PATH) / "Arm" / "vela.ini"


def family_of(target: str) -> str:
    """The Ethos-U family of a target name (``"ethos-u55-128"`` -> ``"ethos-u55"``).

    Example:
        >>> family_of("ethos-u85-256")
        'ethos-u85'
    """
    return target.lower().rsplit("-", 1)[0]


def check_target(target: str) -> str:
    """Return the normalised (lower-case) target, or raise listing Vela's targets.

    Example:
        >>> check_target("Ethos-U55-128")
        'ethos-u55-128'
    """
    normalised = str(target).strip().lower()
    if normalised not in TARGETS:
        raise EthosUConfigError(
            f"unknown Ethos-U target {target!r}; valid targets: {', '.join(TARGETS)}",
            option="target",
            value=target,
            choices=TARGETS,
        )
    return normalised


@dataclass(frozen=True)
class VelaConfigFiles:
    """The .ini files in use and which one defines each system config and memory mode.

    Example:
        >>> read_config_files().files[0].name
        'vela.ini'
    """

    files: tuple[Path, ...]
    system_configs: dict[str, Path]
    memory_modes: dict[str, Path]
    parser: configparser.ConfigParser


def _read_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    parser.optionxform = str  # keep key case: Vela's C++ core reads keys case-sensitively
    try:
        with open(path, encoding="utf-8") as handle:
            parser.read_file(handle, source=str(path))
    except OSError as exc:
        raise EthosUConfigError(
            f"cannot read Vela config file {str(path)!r}: {exc.strerror or exc}",
            option="config_ini",
            value=str(path),
        ) from None
    except configparser.Error as exc:
        first_line = str(exc).splitlines()[0]
        raise EthosUConfigError(
            f"Vela config file {str(path)!r} is not a valid .ini file: {first_line}",
            option="config_ini",
            value=str(path),
        ) from None
    return parser


@functools.lru_cache(maxsize=8)
def _read_ini_cached(path: str, mtime_ns: int) -> configparser.ConfigParser:
    return _read_ini(Path(path))


def read_config_files(config_ini: str | Path | None = None) -> VelaConfigFiles:
    """Read Vela's ``vela.ini`` plus an optional user ``.ini`` and index their sections.

    A user file may add system configs and memory modes (and ``inherit`` from Vela's); it
    may not redefine one of Vela's sections, because Vela's Python side and its C++ core
    would resolve such a duplicate differently.

    Example:
        >>> files = read_config_files()
        >>> "Ethos_U55_High_End_Embedded" in files.system_configs
        True
    """
    paths = [vela_ini_path()]
    if config_ini is not None:
        user = Path(config_ini).expanduser().resolve()
        if user.suffix != ".ini":
            raise EthosUConfigError(
                f"Vela config files must use the .ini extension: {str(config_ini)!r}",
                option="config_ini",
                value=str(config_ini),
            )
        if not user.is_file():
            raise EthosUConfigError(
                f"Vela config file not found: {str(config_ini)!r}",
                option="config_ini",
                value=str(config_ini),
            )
        if user != paths[0].resolve():
            paths.append(user)
    merged = configparser.ConfigParser()
    merged.optionxform = str
    known_keys = _canonical_keys(_read_ini_cached(str(paths[0]), paths[0].stat().st_mtime_ns))
    system_configs: dict[str, Path] = {}
    memory_modes: dict[str, Path] = {}
    owner: dict[str, Path] = {}
    for path in paths:
        parser = _read_ini_cached(str(path), path.stat().st_mtime_ns)
        for section in parser.sections():
            if section in owner:
                raise EthosUConfigError(
                    f"section [{section}] of {str(path)!r} is already defined in "
                    f"{str(owner[section])!r}; give it another name",
                    option="config_ini",
                    value=str(path),
                )
            owner[section] = path
            if path != paths[0]:
                _check_key_case(parser, section, path, known_keys)
            merged[section] = dict(parser.items(section, raw=True))
            if section.startswith(_SYSTEM_PREFIX):
                system_configs[section[len(_SYSTEM_PREFIX) :]] = path
            elif section.startswith(_MEMORY_PREFIX):
                memory_modes[section[len(_MEMORY_PREFIX) :]] = path
    return VelaConfigFiles(tuple(paths), system_configs, memory_modes, merged)


_MEMORIES = ("Sram", "Dram", "OnChipFlash", "OffChipFlash")


def _canonical_keys(vela_ini: configparser.ConfigParser) -> dict[str, str]:
    """lower-case key -> Vela's spelling, from vela.ini (memory keys for every memory)."""
    keys = {"inherit"}
    for section in vela_ini.sections():
        for key in vela_ini[section]:
            keys.add(key)
            for memory in _MEMORIES:
                if key.startswith(memory + "_"):
                    keys.update(m + key[len(memory) :] for m in _MEMORIES)
    return {k.lower(): k for k in keys}


def _check_key_case(
    parser: configparser.ConfigParser, section: str, path: Path, known: dict[str, str]
) -> None:
    for key in parser[section]:
        canonical = known.get(key.lower())
        if canonical is not None and canonical != key:
            raise EthosUConfigError(
                f"key {key!r} in [{section}] of {str(path)!r} must be spelled {canonical!r}: "
                "Vela's C++ compiler core reads .ini keys case-sensitively",
                option="config_ini",
                value=str(path),
            )


def _config_family(system_config: str) -> str | None:
    match = _FAMILY_IN_NAME.match(system_config)
    return f"ethos-u{match.group(1)}" if match else None


def _mode_option(parser: configparser.ConfigParser, section: str, key: str, default: str) -> str:
    """A memory-mode option, following Vela's ``inherit`` chain (the child wins)."""
    seen: set[str] = set()
    value = default
    chain: list[str] = []
    while section and section not in seen and parser.has_section(section):
        seen.add(section)
        chain.append(section)
        section = parser.get(section, "inherit", fallback="")
    for name in reversed(chain):
        value = parser.get(name, key, fallback=value)
    return value


def _is_dedicated_sram(files: VelaConfigFiles, memory_mode: str) -> bool:
    section = _MEMORY_PREFIX + memory_mode
    arena = _mode_option(files.parser, section, "arena_mem_area", "Axi0")
    cache = _mode_option(files.parser, section, "cache_mem_area", "Axi0")
    return arena.strip().lower() != cache.strip().lower()


def system_configs_for(target: str, config_ini: str | Path | None = None) -> tuple[str, ...]:
    """System configs usable with ``target`` (its family's, plus family-less user ones).

    Example:
        >>> system_configs_for("ethos-u55-128")
        ('Ethos_U55_Deep_Embedded', 'Ethos_U55_High_End_Embedded')
    """
    family = family_of(check_target(target))
    files = read_config_files(config_ini)
    return tuple(
        name for name in files.system_configs if _config_family(name) in (None, family)
    )


@dataclass(frozen=True)
class ResolvedConfig:
    """A validated (target, system config, memory mode) and what Vela derives from it.

    Example:
        >>> cfg = resolve_config("ethos-u55-128")
        >>> cfg.const_memory, cfg.arena_memory, cfg.core_clock_hz
        ('OffChipFlash', 'Sram', 500000000.0)
    """

    target: str
    system_config: str
    memory_mode: str
    config_files: tuple[Path, ...]
    core_clock_hz: float
    arena_cache_size: int
    const_memory: str
    arena_memory: str
    cache_memory: str

    @property
    def family(self) -> str:
        """``"ethos-u55"``, ``"ethos-u65"`` or ``"ethos-u85"``."""
        return family_of(self.target)


def _vela_architecture(target: str, system_config: str, memory_mode: str, files: tuple[Path, ...]):
    """Vela's own ArchitectureFeatures for the combination, or the reason Vela refuses it."""
    stamps = tuple((str(p), p.stat().st_mtime_ns) for p in files)
    return _vela_architecture_cached(target, system_config, memory_mode, stamps)


@functools.lru_cache(maxsize=256)
def _vela_architecture_cached(
    target: str, system_config: str, memory_mode: str, stamps: tuple[tuple[str, int], ...]
):
    try:
        with capture_output(native=False):
            arch = _vela_arch.ArchitectureFeatures(
                vela_config_files=[path for path, _ in stamps],
                accelerator_config=target,
                system_config=system_config,
                memory_mode=memory_mode,
                max_blockdep=_vela_arch.ArchitectureFeatures.MAX_BLOCKDEP,
                verbose_config=False,
                arena_cache_size=None,
            )
    except VelaError as exc:
        return None, f"Vela refuses it: {getattr(exc, 'error_msg', exc)}"
    return arch, None


def _combination_problem(
    target: str, system_config: str, memory_mode: str, files: VelaConfigFiles
) -> str | None:
    if family_of(target) == "ethos-u55" and _is_dedicated_sram(files, memory_mode):
        return (
            "Ethos-U55 has no dedicated SRAM: the arena must live in the SRAM it shares "
            "with the cache (as in Shared_Sram or Sram_Only)"
        )
    return _vela_architecture(target, system_config, memory_mode, files.files)[1]


def memory_modes_for(
    target: str, system_config: str | None = None, config_ini: str | Path | None = None
) -> tuple[str, ...]:
    """Memory modes that are valid for ``target`` with ``system_config`` (default: family's).

    Example:
        >>> memory_modes_for("ethos-u55-128")
        ('Sram_Only', 'Shared_Sram')
    """
    target = check_target(target)
    files = read_config_files(config_ini)
    system_config = system_config or FAMILY_DEFAULTS[family_of(target)][0]
    return tuple(
        mode
        for mode in files.memory_modes
        if _combination_problem(target, system_config, mode, files) is None
    )


def resolve_config(
    target: str,
    system_config: str | None = None,
    memory_mode: str | None = None,
    config_ini: str | Path | None = None,
) -> ResolvedConfig:
    """Validate a combination (defaults per family) or raise :class:`EthosUConfigError`.

    Example:
        >>> cfg = resolve_config("ethos-u65-256")
        >>> cfg.system_config, cfg.memory_mode
        ('Ethos_U65_High_End', 'Dedicated_Sram_384KB')
    """
    target = check_target(target)
    family = family_of(target)
    default_system, default_memory = FAMILY_DEFAULTS[family]
    files = read_config_files(config_ini)
    where = ", ".join(str(p) for p in files.files)

    system_config = default_system if system_config is None else str(system_config)
    valid_systems = tuple(n for n in files.system_configs if _config_family(n) in (None, family))
    if system_config not in files.system_configs:
        raise EthosUConfigError(
            f"unknown system config {system_config!r} for {target}; valid system configs: "
            f"{', '.join(valid_systems)} (from {where})",
            option="system_config",
            value=system_config,
            choices=valid_systems,
        )
    if system_config not in valid_systems:
        raise EthosUConfigError(
            f"system config {system_config!r} is for {_config_family(system_config)}, not "
            f"{target}; valid system configs: {', '.join(valid_systems)}",
            option="system_config",
            value=system_config,
            choices=valid_systems,
        )

    memory_mode = default_memory if memory_mode is None else str(memory_mode)
    problems = {
        mode: _combination_problem(target, system_config, mode, files)
        for mode in files.memory_modes
    }
    valid_modes = tuple(mode for mode, problem in problems.items() if problem is None)
    if memory_mode not in files.memory_modes:
        raise EthosUConfigError(
            f"unknown memory mode {memory_mode!r}; valid memory modes for {target} with "
            f"{system_config}: {', '.join(valid_modes)} (from {where})",
            option="memory_mode",
            value=memory_mode,
            choices=valid_modes,
        )
    if problems[memory_mode] is not None:
        raise EthosUConfigError(
            f"memory mode {memory_mode!r} is not valid for {target} with system config "
            f"{system_config}: {problems[memory_mode]}; valid memory modes: "
            f"{', '.join(valid_modes) or '(none)'}",
            option="memory_mode",
            value=memory_mode,
            choices=valid_modes,
        )

    arch, _ = _vela_architecture(target, system_config, memory_mode, files.files)
    return ResolvedConfig(
        target=target,
        system_config=system_config,
        memory_mode=memory_mode,
        config_files=files.files,
        core_clock_hz=float(arch.core_clock),
        arena_cache_size=int(arch.arena_cache_size),
        const_memory=arch.permanent_storage_mem_area.name,
        arena_memory=arch.feature_map_storage_mem_area.name,
        cache_memory=arch.fast_storage_mem_area.name,
    )
