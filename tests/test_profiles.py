"""Hardware profiles: the shipped ones load with a source per figure; bad ones are rejected."""

import pytest
import yaml

from poetsim.errors import UserInputError
from poetsim.inputs.profiles import Platform, load_platform, shipped_platforms

SHIPPED = ("jetson-tx2", "mkr1000", "nrf52840", "rpi4", "rpi4-nocache")

NUMERIC_FIELDS = {
    "ram_bytes",
    "compute.flops_per_s",
    "compute.power_w",
    "static_power_w",
    "storage.page_in.latency_s",
    "storage.page_in.bytes_per_s",
    "storage.page_out.latency_s",
    "storage.page_out.bytes_per_s",
    "storage.power_w",
    "dma_channels",
    "memory_bus_bytes_per_s",
}


def _user_profile() -> dict:
    """A complete, valid profile as a user would write it."""
    return {
        "name": "my-board",
        "title": "My board",
        "ram_bytes": 1048576,
        "compute": {"flops_per_s": 2.0e8, "power_w": 0.25},
        "static_power_w": 0.05,
        "storage": {
            "kind": "QSPI flash",
            "page_in": {"latency_s": 1e-4, "bytes_per_s": 2.0e7},
            "page_out": {"latency_s": 2e-3, "bytes_per_s": 1.0e6},
            "power_w": 0.03,
        },
        "dma_channels": 1,
        "memory_bus_bytes_per_s": 1.9e9,
        "notes": ["measured on rev B"],
        "sources": {path: "bench measurement" for path in NUMERIC_FIELDS},
    }


def _write(tmp_path, data, name="board.yaml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def test_the_five_platforms_are_shipped():
    """`shipped_platforms` lists exactly the profiles the docs promise."""
    assert tuple(shipped_platforms()) == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profile_loads_with_a_source_for_every_figure(name):
    """Each shipped profile validates, names itself, and explains every numeric figure."""
    platform = load_platform(name)
    assert platform.name == name
    assert platform.title and platform.notes and platform.storage.kind
    expected = NUMERIC_FIELDS | ({"compute.energy_flops_per_s"} if platform.compute.energy_flops_per_s else set())
    expected |= {"device.clock_hz"} if platform.device else set()
    assert set(platform.sources) == expected
    assert all(len(text) > 20 for text in platform.sources.values())


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_profile_cites_the_paper_a_vendor_or_an_assumption(name):
    """Every source says where its figure comes from: the paper, a named document or an assumption."""
    markers = ("2207.07697", "data sheet", "product specification", "product brief", "poetsim assumption", "pidramble")
    for path, text in load_platform(name).sources.items():
        assert any(marker in text.lower() for marker in markers), f"{name}: {path}: {text}"


def test_paper_figures_are_carried_unchanged():
    """The authors' figures survive into the profiles exactly (spot checks per platform)."""
    mkr, nrf, pi, pi_nocache, tx2 = (load_platform(n) for n in ("mkr1000", "nrf52840", "rpi4", "rpi4-nocache", "jetson-tx2"))
    assert 2000 / mkr.compute.flops_per_s == pytest.approx(0.012, rel=1e-12)
    assert mkr.compute.power_w == pytest.approx(20e-3 * 3.3)
    assert nrf.compute.power_w == pytest.approx(3.328e-3 * 3.3)
    assert nrf.storage == mkr.storage
    assert pi.compute.flops_per_s == 2e9 and pi.compute.power_w == 3.0
    assert pi.storage.page_out.latency_s == pytest.approx(0.0185314e-3)
    assert pi_nocache.storage.page_out.latency_s == pytest.approx(4.23532e-3)
    assert pi_nocache.storage.page_out.bytes_per_s == 17.1e6
    assert pi_nocache.compute == pi.compute and pi_nocache.storage.page_in == pi.storage.page_in
    assert tx2.compute.power_w == pytest.approx(0.995 - 0.229)
    assert tx2.storage.page_in.bytes_per_s == 108.5e6


def test_ram_sizes_are_the_documented_models():
    """MKR1000 32 KiB, nRF52840 256 KiB, Pi 4B the 4 GB model, TX2 8 GB."""
    sizes = {name: load_platform(name).ram_bytes for name in SHIPPED}
    assert sizes == {
        "mkr1000": 32 * 2**10,
        "nrf52840": 256 * 2**10,
        "rpi4": 4 * 2**30,
        "rpi4-nocache": 4 * 2**30,
        "jetson-tx2": 8 * 2**30,
    }


def test_user_profile_loads_by_path(tmp_path):
    """A YAML path loads as a platform, with every field as written."""
    path = _write(tmp_path, _user_profile())
    platform = load_platform(str(path))
    assert isinstance(platform, Platform)
    assert platform.name == "my-board"
    assert platform.storage.page_out.seconds(1e6) == pytest.approx(2e-3 + 1.0)
    assert platform.compute.joules_per_flop == pytest.approx(0.25 / 2.0e8)


def test_user_profile_loads_from_a_path_object(tmp_path):
    """A pathlib.Path works as well as a string."""
    assert load_platform(_write(tmp_path, _user_profile())).ram_bytes == 1048576


def _broken(mutate):
    data = _user_profile()
    mutate(data)
    return data


@pytest.mark.parametrize(
    "mutate, field, words",
    [
        (lambda d: d["sources"].pop("storage.page_in.latency_s"), "storage.page_in.latency_s", "no source given"),
        (lambda d: d["sources"].update({"compute.power_w": ""}), "compute.power_w", "no source given"),
        (lambda d: d["compute"].update({"energy_flops_per_s": 1e8}), "compute.energy_flops_per_s", "no source given"),
        (lambda d: d.update({"colour": "red"}), "colour", "unknown field"),
        (lambda d: d["storage"].update({"speed": 3}), "storage.speed", "unknown field"),
        (
            lambda d: d["storage"]["page_out"].update({"bytes_per_s": -1.0}),
            "storage.page_out.bytes_per_s",
            "greater than or equal to 1",
        ),
        (lambda d: d["compute"].update({"power_w": float("inf")}), "compute.power_w", "finite number"),
        (lambda d: d["storage"].update({"power_w": 1e300}), "storage.power_w", "less than or equal to 1000000"),
        (lambda d: d.update({"name": "two\nlines"}), "name", "control character U+000A"),
        (lambda d: d.update({"name": "  "}), "name", "is empty"),
        (lambda d: d.update({"title": ""}), "title", "is empty"),
        (lambda d: d.update({"dma_channels": 0}), "dma_channels", "greater than or equal to 1"),
        (lambda d: d.pop("ram_bytes"), "ram_bytes", "Field required"),
        (lambda d: d["sources"].update({"compute.flop_per_s": "typo"}), "compute.flop_per_s", "names no figure"),
    ],
)
def test_bad_profile_names_the_file_and_the_field(tmp_path, mutate, field, words):
    """A wrong profile raises UserInputError naming the file, the field path and the problem."""
    path = _write(tmp_path, _broken(mutate))
    with pytest.raises(UserInputError) as err:
        load_platform(path)
    message = str(err.value)
    assert str(path) in message
    assert field in message
    assert words in message


def test_bad_yaml_names_the_file(tmp_path):
    """Text that is not YAML is rejected with the file name, not a parser traceback."""
    path = _write(tmp_path, "name: [unclosed\ncompute: {")
    with pytest.raises(UserInputError, match="not valid YAML") as err:
        load_platform(path)
    assert str(path) in str(err.value)


def test_yaml_that_is_not_a_mapping_is_rejected(tmp_path):
    """A list at the top level is not a profile."""
    path = _write(tmp_path, "- 1\n- 2\n")
    with pytest.raises(UserInputError, match="must be a mapping") as err:
        load_platform(path)
    assert str(path) in str(err.value)


def test_missing_profile_file_is_named(tmp_path):
    """A .yaml path that does not exist is reported as such."""
    path = tmp_path / "absent.yaml"
    with pytest.raises(UserInputError, match="no such platform file") as err:
        load_platform(path)
    assert str(path) in str(err.value)


def test_unknown_platform_name_lists_the_shipped_ones():
    """An unknown name is rejected with the name and the shipped alternatives."""
    with pytest.raises(UserInputError) as err:
        load_platform("pdp11")
    message = str(err.value)
    assert "unknown platform 'pdp11'" in message
    assert all(name in message for name in SHIPPED)
