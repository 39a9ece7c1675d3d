"""Rule-made schedules: keep-all, checkpoint-sqrt, Capuchin and POFO."""
