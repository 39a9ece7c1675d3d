"""`make bench`: run the benchmarks and write their CSVs under results/bench/.

    python -m benchmarks                 # all, from the repository's root:
                                         # solver, simulator, sweep, sweep-loaded, pytorch, faults,
                                         # cluster, certify, scaling, covers, effort, outside, startup,
                                         # device, train, replay
    python -m benchmarks solver sweep    # a selection

Speed targets are checked here, never by timed assertions in tests.
"""

import sys
from pathlib import Path

from benchmarks import certify, cluster, device, effort, faults, outside, replay, simulator, solver, startup, sweep

OUT = Path("results/bench")


def main(argv: list[str]) -> int:
    """Run the named benchmarks (default all) and print each CSV's path and table."""

    def pytorch_bench():
        from benchmarks import pytorch  # needs torch: imported only when asked for

        imported = pytorch.run(OUT / "pytorch.csv")
        print(imported.to_string(index=False))
        print(f"== pytorch closed loop: {OUT / 'pytorch_validate.csv'}")
        return pytorch.run_validation(OUT / "pytorch_validate.csv")

    def train_bench():
        from benchmarks import train  # needs torch: imported only when asked for

        return train.run(OUT / "train.csv")

    benches = {
        "solver": lambda: solver.run(OUT / "solver.csv"),
        "simulator": lambda: simulator.run(OUT / "simulator.csv"),
        "sweep": lambda: sweep.run(OUT / "sweep.csv"),
        "sweep-loaded": lambda: sweep.run_loaded(OUT / "sweep-loaded.csv"),
        "pytorch": pytorch_bench,
        "faults": lambda: faults.run(OUT / "faults.csv"),
        "cluster": lambda: cluster.run(OUT / "cluster.csv"),
        "certify": lambda: certify.run(OUT / "certify.csv"),
        "scaling": lambda: certify.scaling(OUT / "scaling.csv"),
        "covers": lambda: certify.cover_ab(OUT / "covers.csv"),
        "effort": lambda: effort.run(OUT / "effort.csv"),
        "outside": lambda: outside.run(OUT / "outside.csv"),
        "startup": lambda: startup.run(OUT / "startup.csv"),
        "device": lambda: device.run(OUT / "device.csv"),
        "train": train_bench,
        "replay": lambda: replay.run(OUT / "replay.csv"),
    }
    chosen = argv or list(benches)
    unknown = [name for name in chosen if name not in benches]
    if unknown:
        print(f"poetsim.bench: unknown benchmark {unknown[0]} (use {', '.join(benches)})", file=sys.stderr)
        return 2
    for name in chosen:
        result = benches[name]()
        print(f"== {name}: {OUT / (name + '.csv')}")
        if result is not None:
            print(result.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
