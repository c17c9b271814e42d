"""What XLA says of a compiled graph: its cost, FLOPs, buffers, recompile diffs and out-of-memory messages."""
