"""Schedules and what they are judged by: instructions, costs, the problem, the checker, file formats."""
