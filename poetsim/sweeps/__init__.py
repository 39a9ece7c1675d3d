"""Sweeps: the grid of points, the workers that run them, runs.csv and what one point proves of another."""
