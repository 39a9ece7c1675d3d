"""User input at the edge: file limits, platform profiles and scenario files."""
