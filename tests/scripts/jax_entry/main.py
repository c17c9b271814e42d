"""Backend detection from what the program does: the entry point imports no framework itself; `train`, its own
module beside it, imports JAX (the old text match read only this file and took it for a torch_xla script)."""
import sys

from train import main

sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 8))
