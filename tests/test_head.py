"""The compiled PPO head (csrc/wfrl_head.h via wfrl.ppo.head.head_loss) equals its torch-autograd
twin (head_loss_reference): loss, statistics and the gradient with respect to the logits."""
import shutil

import numpy as np
import pytest
import torch

from wfrl import _core
from wfrl.ppo.head import head_loss, head_loss_reference

A = 145


def _case(seed, n=300, masked=True, scale=3.0, ratio_spread=0.5):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, A, generator=g) * scale
    allowed = None
    if masked:
        allowed = torch.rand(n, A, generator=g) > 0.5
        allowed[torch.arange(n), torch.randint(0, A, (n,), generator=g)] = True
    # actions drawn among the allowed ones; behaviour log-probabilities near the current ones so
    # that some ratios are clipped and some are not
    probs = torch.softmax(logits if allowed is None else logits.masked_fill(~allowed, -1e9), -1)
    actions = torch.multinomial(probs, 1, generator=g).squeeze(1)
    logp = torch.log(probs.gather(1, actions[:, None]).squeeze(1))
    old = logp + ratio_spread * torch.randn(n, generator=g)
    adv = torch.randn(n, generator=g)
    return logits, allowed, actions, old, adv


def _both(logits, allowed, actions, old, adv, clip=0.2, ent=0.01):
    out = []
    for fn in (head_loss, head_loss_reference):
        z = logits.clone().requires_grad_(True)
        loss, stats = fn(z, allowed, actions, old, adv, clip, ent)
        loss.backward()
        out.append((float(loss.detach()), np.asarray(stats), z.grad.numpy().copy()))
    return out


@pytest.mark.parametrize("seed,masked,scale,spread", [
    (0, True, 3.0, 0.5), (1, False, 3.0, 0.5), (2, True, 0.1, 0.05), (3, True, 30.0, 0.5),
    (4, False, 10.0, 2.0), (5, True, 1.0, 0.0)])
def test_compiled_head_equals_autograd_twin(seed, masked, scale, spread):
    (l_c, s_c, g_c), (l_r, s_r, g_r) = _both(*_case(seed, masked=masked, scale=scale,
                                                  ratio_spread=spread))
    assert l_c == pytest.approx(l_r, rel=1e-5, abs=1e-6)
    np.testing.assert_allclose(s_c, s_r, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g_c, g_r, rtol=1e-4, atol=1e-8)
    if spread >= 0.5:
        assert 0 < s_c[3] < 1, "the case must have clipped and unclipped ratios"


def test_masked_actions_get_no_probability_and_no_gradient():
    logits, allowed, actions, old, adv = _case(7)
    (_, _, g_c), _ = _both(logits, allowed, actions, old, adv)
    assert np.all(g_c[~allowed.numpy()] == 0.0)
    assert np.any(g_c[allowed.numpy()] != 0.0)


def test_taken_masked_action_has_zero_ratio_like_the_bias_convention():
    logits, allowed, actions, old, adv = _case(8, n=50)
    allowed[0, actions[0]] = False                      # the recorded action is masked now
    (l_c, s_c, g_c), (l_r, s_r, g_r) = _both(logits, allowed, actions, old, adv)
    assert l_c == pytest.approx(l_r, rel=1e-5)
    np.testing.assert_allclose(g_c, g_r, rtol=1e-4, atol=1e-8)


def test_gradient_scales_with_incoming_gradient():
    logits, allowed, actions, old, adv = _case(9, n=40)
    z = logits.clone().requires_grad_(True)
    loss, _ = head_loss(z, allowed, actions, old, adv, 0.2, 0.01)
    (3.0 * loss).backward()
    z2 = logits.clone().requires_grad_(True)
    loss2, _ = head_loss_reference(z2, allowed, actions, old, adv, 0.2, 0.01)
    (3.0 * loss2).backward()
    np.testing.assert_allclose(z.grad.numpy(), z2.grad.numpy(), rtol=1e-4, atol=1e-8)


def test_bad_arguments_are_refused():
    logits, allowed, actions, old, adv = (t.numpy() for t in _case(10, n=8))
    allowed = allowed.astype(np.uint8)
    grad = np.empty_like(logits)
    bad = actions.copy()
    bad[3] = A
    with pytest.raises(ValueError, match="outside"):
        _core.ppo_head(logits, allowed, bad, old, adv, 0.2, 0.01, grad)
    with pytest.raises(ValueError, match="grad"):
        _core.ppo_head(logits, allowed, actions, old, adv, 0.2, 0.01, grad[:4])
    with pytest.raises(ValueError, match="allowed"):
        _core.ppo_head(logits, np.ascontiguousarray(allowed[:, :10]), actions, old, adv, 0.2, 0.01, grad)
    with pytest.raises(ValueError, match="entries"):
        _core.ppo_head(logits, allowed, actions, old[:5], adv, 0.2, 0.01, grad)
    with pytest.raises(ValueError, match="overlap"):
        _core.ppo_head(logits, allowed, actions, old, adv, 0.2, 0.01, logits)
    none_allowed = allowed.copy()
    none_allowed[2] = 0
    with pytest.raises(ValueError, match="1 row.s. allow no action"):
        _core.ppo_head(logits, none_allowed, actions, old, adv, 0.2, 0.01, grad)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_head_is_clean_under_asan_and_ubsan(tmp_path):
    from conftest import run_sanitized
    run_sanitized("check_head", tmp_path, [300, 7], extra_flags=["-fopenmp-simd"])
