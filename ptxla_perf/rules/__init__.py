"""Rules: figures in, findings out, one module per scope (the registry names them all)."""
