"""The stage MILP: its rows, its solvers and the HiGHS program it runs."""
