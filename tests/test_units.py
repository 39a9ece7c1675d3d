"""Parsing of sizes, percentages and runtime multiples."""

import pytest

from poetsim.units import RamSpec, parse_bytes, parse_ram, parse_runtime


@pytest.mark.parametrize(
    "text,expected",
    [
        (1048576, 1048576),
        ("1048576", 1048576),
        ("256KB", 256_000),
        ("256KiB", 262_144),
        ("1.5MiB", 1_572_864),
        ("2 GB", 2 * 10**9),
        ("1e3", 1000),
        ("7b", 7),
    ],
)
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["-5", "0", "12 parsecs", "lots", True])
def test_parse_bytes_rejects(text):
    with pytest.raises(ValueError):
        parse_bytes(text)


def test_parse_ram_percentage_resolves_against_keep_all():
    spec = parse_ram("50%")
    assert spec == RamSpec(None, 50.0, "50%")
    assert spec.resolve(2_453_760) == 1_226_880
    assert str(spec) == "50%"
    assert parse_ram("1MiB").resolve(10) == 1_048_576


@pytest.mark.parametrize("text", ["0%", "-3%", "abc%"])
def test_parse_ram_rejects(text):
    with pytest.raises(ValueError):
        parse_ram(text)


@pytest.mark.parametrize("text,expected", [("1.2x", 1.2), ("2X", 2.0), (1.5, 1.5), ("1", 1.0)])
def test_parse_runtime(text, expected):
    assert parse_runtime(text) == expected


@pytest.mark.parametrize("text", ["0x", "-1x", "fast", False])
def test_parse_runtime_rejects(text):
    with pytest.raises(ValueError):
        parse_runtime(text)
