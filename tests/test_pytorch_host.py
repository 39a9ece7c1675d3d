"""Measuring the host: a valid profile with per-op-kind rates and sources, the storage fit, RAPL."""

import pytest

torch = pytest.importorskip("torch")

from poetsim.inputs.profiles import load_platform  # noqa: E402
from poetsim.pytorch import host, models  # noqa: E402
from poetsim.pytorch.capturing import capture  # noqa: E402
from poetsim.schedule.costs import node_costs  # noqa: E402

SMALL_FILES = (4096, 65536, 262144)


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    return capture(models.mlp(), (torch.randn(4, 1, 28, 28),), name="mlp")


@pytest.fixture(scope="module")
def profile(mlp, tmp_path_factory):
    """A profile calibrated on the MLP, with small storage files, one timed run."""
    return host.profile_host(
        tmp_path_factory.mktemp("swap"),
        captures=[mlp],
        repeats=1,
        threads=1,
        storage_sizes=SMALL_FILES,
        rapl_root=tmp_path_factory.mktemp("no-rapl"),
    )


def test_profile_rates_every_op_kind_of_the_calibration_model(profile, mlp):
    """One rate per kind that has FLOPs (the input is a read, not a compute), each with a source."""
    kinds = {n.op for n in mlp.graph.nodes if n.op != "input" and n.flops > 0}
    assert set(profile.compute.op_flops_per_s) == kinds
    assert all(rate > 0 for rate in profile.compute.op_flops_per_s.values())
    for kind in kinds:
        assert profile.sources[f"compute.op_flops_per_s.{kind}"].startswith("measured on ")
    assert profile.dma_channels == 1
    assert profile.storage.page_out.bytes_per_s > 0 and profile.storage.page_in.bytes_per_s > 0


def test_without_energy_counters_the_profile_says_energy_is_modelled(profile):
    assert "modelled, not measured" in profile.sources["compute.power_w"]
    assert "modelled, not measured" in profile.sources["static_power_w"]
    assert any("Energy is modelled" in note for note in profile.notes)


def test_profile_states_the_overlap_interference_it_does_not_model(profile):
    """The profile measures how computes and transfers slow each other and says the model ignores it."""
    notes = [note for note in profile.notes if note.startswith("Measured, not modelled")]
    assert len(notes) == 1 and "computes ran" in notes[0] and "do not slow each other" in notes[0]


def test_interference_note_says_slower_or_faster():
    note = host.Interference(compute_slowdown=0.49, transfer_slowdown=-0.04).note()
    assert "computes ran 49 % slower" in note and "transfer 4 % faster" in note


def test_interference_is_measured_with_transfers_running_beside_computes(mlp, tmp_path):
    measured = host.measure_interference(mlp, tmp_path, threads=1, repeats=2, durable=False)
    # Slowdowns are ratios of real times less one: above -1, and finite.
    assert -1 < measured.compute_slowdown < 100 and -1 < measured.transfer_slowdown < 100
    assert not list(tmp_path.glob("interference*")), "the measurement's file is removed"


def test_written_profile_loads_and_times_nodes_by_their_kind(profile, mlp, tmp_path):
    """The YAML is a profile like the shipped ones; a node's compute time is its FLOPs over its kind's rate."""
    path = tmp_path / "host.yaml"
    host.write_profile(profile, path)
    loaded = load_platform(path)
    assert loaded == profile
    costs = node_costs(mlp.graph, loaded)
    first = next(n for n in mlp.graph.nodes if n.op == "linear")
    assert costs.compute_s[first.id] == pytest.approx(first.flops / loaded.compute.op_flops_per_s["linear"])
    assert costs.compute_j[first.id] == pytest.approx(loaded.compute.power_w * costs.compute_s[first.id])


def test_storage_fit_recovers_latency_and_bandwidth():
    """Exact points on latency + size / bandwidth give back both figures."""
    samples = [(size, 0.002 + size / 5e8) for size in (4096, 65536, 1 << 20, 8 << 20) for _ in range(3)]
    fit = host._fit(samples)
    assert fit.latency_s == pytest.approx(0.002, rel=1e-6)
    assert fit.bytes_per_s == pytest.approx(5e8, rel=1e-6)


def test_rapl_reads_package_counters_only(tmp_path):
    """intel-rapl:0 counts; its sub-domain intel-rapl:0:0 (the cores, inside the package) does not."""
    (tmp_path / "intel-rapl:0").mkdir()
    (tmp_path / "intel-rapl:0" / "energy_uj").write_text("2000000\n")
    (tmp_path / "intel-rapl:0:0").mkdir()
    (tmp_path / "intel-rapl:0:0" / "energy_uj").write_text("5000000\n")
    rapl = host._Rapl(tmp_path)
    assert rapl.readable and rapl.energy_j() == pytest.approx(2.0)


def test_recalibrated_profile_takes_the_rates_of_one_run_and_keeps_the_rest(profile, mlp, tmp_path):
    from poetsim.pytorch.executor import execute

    run = execute(mlp, host.keep_all_schedule(mlp.graph), tmp_path, check_gradients=False, threads=1)
    updated = host.recalibrated(profile, mlp.graph, run, "a test run")
    rates, overall = host.rates_of([(mlp.graph, run)])
    assert dict(updated.compute.op_flops_per_s) == rates and updated.compute.flops_per_s == pytest.approx(overall)
    assert updated.storage == profile.storage and updated.static_power_w == profile.static_power_w
    assert updated.sources["compute.flops_per_s"].endswith("in a test run")
    assert sum(note.startswith(host.COMPUTE_NOTE) for note in updated.notes) == 1
