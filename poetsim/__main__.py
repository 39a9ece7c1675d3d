"""`python -m poetsim` and the `poetsim` command: the CLI, with Ctrl-C during start-up as one line."""

import sys


def main() -> None:
    """Import the CLI and run it; an interrupt while importing ends as the CLI's interrupts do."""
    try:
        from poetsim.cli import app
    except KeyboardInterrupt:
        print("poetsim: interrupted", file=sys.stderr)
        sys.exit(130)
    app(prog_name="poetsim")


if __name__ == "__main__":
    main()
