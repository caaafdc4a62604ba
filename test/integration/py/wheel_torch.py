"""Sample tests for the pytest plugin on a real CPU PyTorch model
(test_wheel): _ok passes, _over fails naming its "# names:" line."""
import pytest
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))


@pytest.mark.memtally_limit(peak="64 MB")
def test_torch_ok():
    with torch.no_grad():
        y = model(torch.randn(64, 512))
    assert y.shape == (64, 10)


@pytest.mark.memtally_limit(peak="16 MB")
def test_torch_over():
    with torch.no_grad():
        y = model(torch.randn(8192, 512))  # names: torch
    assert y.shape == (8192, 10)
