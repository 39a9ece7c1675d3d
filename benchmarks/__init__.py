"""The benchmarks of speed and memory: one module per subject, each writing a CSV under results/bench/ (`make bench`)."""
