"""`python -m poetsim` runs the command line."""

from poetsim.cli import app

app(prog_name="poetsim")
