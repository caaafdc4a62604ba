from .optimizer import Optimizer, SGD  # noqa: F401
