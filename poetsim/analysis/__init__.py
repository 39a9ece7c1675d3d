"""Results as tables: the headline, the energy guard and the paper's claims."""
