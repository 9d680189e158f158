"""Bad configurations raise EthosUConfigError, listing the valid choices, before Vela runs."""

from __future__ import annotations

import ethosu_tosa_graphs as graphs
import pytest

from ethosu.compiler import TARGETS, EthosUConfigError, compile_tosa
from tosa_verify.errors import TosaError, TosaFormatError


@pytest.fixture
def vela_must_not_run(monkeypatch):
    from ethosu.vela import vela

    def refuse(*_args, **_kwargs):
        raise AssertionError("Vela ran although the configuration is invalid")

    monkeypatch.setattr(vela, "main", refuse)


@pytest.fixture(scope="module")
def tosa() -> bytes:
    return graphs.conv2d()


def _error(tosa, target, **kwargs) -> EthosUConfigError:
    with pytest.raises(EthosUConfigError) as info:
        compile_tosa(tosa, target, **kwargs)
    return info.value


def test_dedicated_sram_on_u55(vela_must_not_run, tosa):
    err = _error(tosa, "ethos-u55-128", memory_mode="Dedicated_Sram")
    assert err.option == "memory_mode"
    assert err.choices == ("Sram_Only", "Shared_Sram")
    assert "Sram_Only, Shared_Sram" in str(err) and "Ethos-U55" in str(err)
    assert isinstance(err, TosaError)  # the CLI maps TosaError to exit code 2


@pytest.mark.parametrize("mode", ["Dedicated_Sram_256KB", "Dedicated_Sram_384KB", "Dedicated_Sram_512KB"])
def test_every_dedicated_mode_refused_on_u55(vela_must_not_run, tosa, mode):
    assert _error(tosa, "ethos-u55-64", memory_mode=mode).choices == ("Sram_Only", "Shared_Sram")


def test_unknown_target(vela_must_not_run, tosa):
    err = _error(tosa, "ethos-u99-256")
    assert err.option == "target" and err.choices == TARGETS
    assert all(t in str(err) for t in ("ethos-u55-32", "ethos-u65-512", "ethos-u85-2048"))


def test_unknown_system_config(vela_must_not_run, tosa):
    err = _error(tosa, "ethos-u55-128", system_config="Ethos_U55_Nonexistent")
    assert err.option == "system_config"
    assert err.choices == ("Ethos_U55_Deep_Embedded", "Ethos_U55_High_End_Embedded")
    assert "Ethos_U55_Deep_Embedded, Ethos_U55_High_End_Embedded" in str(err)


def test_system_config_of_another_family(vela_must_not_run, tosa):
    err = _error(tosa, "ethos-u85-256", system_config="Ethos_U65_High_End")
    assert "Ethos_U85_SYS_DRAM_Mid" in err.choices and "Ethos_U65_High_End" not in err.choices


def test_unknown_memory_mode(vela_must_not_run, tosa):
    err = _error(tosa, "ethos-u65-256", memory_mode="Sram_Everywhere")
    assert err.option == "memory_mode" and "Dedicated_Sram_384KB" in err.choices


def test_memory_mode_invalid_for_system_config(vela_must_not_run, tosa):
    # Flash-based U85 systems have no writable off-chip memory for a dedicated-SRAM arena.
    err = _error(tosa, "ethos-u85-256", system_config="Ethos_U85_SYS_Flash_High",
                 memory_mode="Dedicated_Sram")
    assert err.choices == ("Sram_Only", "Shared_Sram")
    assert "arena_mem_area" in str(err)


@pytest.mark.parametrize("flag", ["--accelerator-config=ethos-u55-64", "--config=x.ini", "--output-dir=/tmp",
                                  "--system-config=Ethos_U55_Deep_Embedded", "--accel=ethos-u55-64",
                                  "--conf", "--list-configs"])
def test_reserved_or_malformed_extra_flags(vela_must_not_run, tosa, flag):
    assert _error(tosa, "ethos-u55-128", extra_flags=[flag]).option == "extra_flags"


def test_stray_positional_in_extra_flags(vela_must_not_run, tosa):
    assert _error(tosa, "ethos-u55-128", extra_flags=["--verbose-all=", "network.tosa"]).option == "extra_flags"


def test_unknown_vela_flag_is_a_config_error(tosa):
    err = _error(tosa, "ethos-u55-128", extra_flags=["--no-such-vela-option"])
    assert err.option == "extra_flags" and "no-such-vela-option" in str(err)


def test_config_ini_errors(vela_must_not_run, tosa, tmp_path):
    assert _error(tosa, "ethos-u55-128", config_ini=tmp_path / "missing.ini").option == "config_ini"
    clash = tmp_path / "clash.ini"
    clash.write_text("[Memory_Mode.Shared_Sram]\nconst_mem_area=Axi1\n")
    err = _error(tosa, "ethos-u55-128", config_ini=clash)
    assert "Memory_Mode.Shared_Sram" in str(err)
    lower = tmp_path / "lower.ini"
    lower.write_text("[System_Config.Mine]\ncore_clock=1e9\nsram_clock_scale=1.0\n")
    err = _error(tosa, "ethos-u55-128", system_config="Mine", config_ini=lower)
    assert "'Sram_clock_scale'" in str(err)
    broken = tmp_path / "broken.ini"
    broken.write_text("no section header\n")
    assert _error(tosa, "ethos-u55-128", config_ini=broken).option == "config_ini"


def test_not_a_tosa_file(vela_must_not_run, tmp_path):
    with pytest.raises(TosaFormatError):
        compile_tosa(b"\x00" * 64, "ethos-u55-128")
    with pytest.raises(TosaFormatError):
        compile_tosa(tmp_path / "missing.tosa", "ethos-u55-128")
