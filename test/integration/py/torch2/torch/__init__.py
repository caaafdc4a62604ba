"""A double of torch >= 2.0 for test_pyhook: only the optimizer step
machinery memtally's start-up hook uses (optim/optimizer.py says which).
Importing it is instant and needs no libtorch."""
__version__ = '2.1.0+memtally.double'
from . import optim  # noqa: F401 (torch/__init__ imports torch.optim too)
