import numpy as np
import pytest
import torch

from wfrl.ppo.netspec import IN_DIM, NumpyPolicy, n_params
from wfrl.ppo.policy import ActorCritic


@pytest.mark.parametrize("hidden", [8, 64])
def test_numpy_forward_equals_torch(hidden):
    torch.manual_seed(hidden)
    model = ActorCritic(hidden)
    # Perturb all parameters so the test does not depend on the small-gain initialisation.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    flat = model.flat_weights()
    assert flat.shape == (n_params(hidden),) and flat.dtype == np.float32
    pol = NumpyPolicy(flat, hidden)
    x = np.random.default_rng(0).random((50, IN_DIM)).astype(np.float32)
    with torch.no_grad():
        logits_t, v_t = model(torch.as_tensor(x))
    for i in range(len(x)):
        logits, v = pol.forward(x[i])
        np.testing.assert_allclose(logits, logits_t[i].numpy(), rtol=1e-5, atol=1e-5)
        assert v == pytest.approx(float(v_t[i]), rel=1e-5, abs=1e-5)


def test_flat_weights_round_trip():
    a, b = ActorCritic(16), ActorCritic(16)
    b.load_flat_weights(a.flat_weights())
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    with pytest.raises(ValueError, match=r"flat weights of length \(10,\) do not fit hidden=16, input 77"):
        b.load_flat_weights(np.zeros(10, np.float32))


def test_sampling_follows_softmax_and_logprob_is_exact():
    torch.manual_seed(1)
    model = ActorCritic(8)
    with torch.no_grad():
        model.actor[-1].weight.mul_(300.0)  # a peaked, non-uniform policy
    pol = NumpyPolicy(model.flat_weights(), 8)
    x = np.random.default_rng(2).random(IN_DIM).astype(np.float32)
    logits, _ = pol.forward(x)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    rng = np.random.default_rng(3)
    n = 40000
    counts = np.zeros(145)
    for _ in range(n):
        a, logp, _ = pol.act(x, rng)
        counts[a] += 1
        assert logp == pytest.approx(np.log(p[a]), abs=1e-4)
    top = np.argsort(p)[-5:]
    # Each of the likeliest actions within 5 binomial standard errors.
    for a in top:
        assert abs(counts[a] / n - p[a]) < 5 * np.sqrt(p[a] * (1 - p[a]) / n)
    ag, _, _ = pol.act(x, rng, greedy=True)
    assert ag == int(np.argmax(p))
