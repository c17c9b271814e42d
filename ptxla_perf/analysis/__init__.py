"""Records -> figures: iterations, compiles, the time breakdown, memory, folding and the roofline."""
