"""Plans: decisions per output, replayed into schedules; the starts and improvements of the search."""
