"""The population engine's per-member convolution (adaptive_po.member_conv): the same values and
gradients as PyTorch's grouped convolution under vmap, forward and backward, for a first layer
(observations need no gradient) and an inner one (its input's gradient flows through PyTorch's own
rule), with and without the ReLU fused into it; the same module outside vmap; and the engine's
network uses it."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, stack_module_state, vmap

from adaptive_po.member_conv import MemberConv2d, MemberConvReLU2d, with_member_convolutions


def _net(stride: int, padding: int, relu: bool = True) -> nn.Sequential:
    act = nn.ReLU if relu else nn.Tanh
    return nn.Sequential(
        nn.Conv2d(3, 6, 3, stride=stride, padding=padding), act(),
        nn.Conv2d(6, 4, 2, stride=1, padding=padding), act(), nn.Flatten(), nn.LazyLinear(5),
    )


@pytest.mark.parametrize("stride,padding,relu", [(1, 0, True), (2, 1, True), (1, 0, False)])
def test_member_convolutions_equal_the_grouped_convolution_under_vmap_grad(stride, padding, relu):
    torch.manual_seed(0)
    k, b = 4, 7
    nets = [_net(stride, padding, relu) for _ in range(k)]
    x = torch.randint(0, 2, (k, b, 3, 9, 9)).float()  # observations: no gradient
    for n in nets:
        n(x[0])  # materialize the lazy layer
    params, _ = stack_module_state(nets)
    reference = nets[0]
    converted = _net(stride, padding, relu)
    converted(x[0])
    assert with_member_convolutions(converted) == 2
    # with a ReLU after it, each convolution takes the ReLU in (which becomes an identity)
    assert [type(m) for m in converted[:4]] == ([MemberConvReLU2d, nn.Identity] * 2 if relu else [MemberConv2d, nn.Tanh] * 2)
    target = torch.randn(k, b, 5)

    def loss(module):
        return lambda p, x, y: ((functional_call(module, p, (x,)) - y) ** 2).mean()

    out_ref = vmap(lambda p, x: functional_call(reference, p, (x,)))(params, x)
    out_new = vmap(lambda p, x: functional_call(converted, p, (x,)))(params, x)
    torch.testing.assert_close(out_new, out_ref, rtol=1e-6, atol=1e-6)
    g_ref = vmap(grad(loss(reference)))(params, x, target)
    g_new = vmap(grad(loss(converted)))(params, x, target)
    assert set(g_ref) == set(g_new)
    for name in g_ref:  # both convolutions' weights and biases, the inner one through its input's gradient too
        torch.testing.assert_close(g_new[name], g_ref[name], rtol=1e-5, atol=1e-6, msg=name)
    assert g_new["0.weight"].abs().sum() > 0 and g_new["2.weight"].abs().sum() > 0


def test_outside_vmap_it_is_the_same_convolution_with_the_same_gradients():
    torch.manual_seed(1)
    conv = nn.Conv2d(2, 3, 3, padding=1)
    member = MemberConv2d(2, 3, 3, padding=1)
    member.load_state_dict(conv.state_dict())
    x = torch.randn(5, 2, 6, 6, requires_grad=True)
    y_ref, y_new = conv(x), member(x)
    assert torch.equal(y_new, y_ref)
    g = torch.randn_like(y_ref)
    ref = torch.autograd.grad(y_ref, (x, conv.weight, conv.bias), g)
    new = torch.autograd.grad(y_new, (x, member.weight, member.bias), g)
    for a, b in zip(new, ref):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_outside_vmap_the_fused_convolution_is_the_convolution_then_its_relu():
    torch.manual_seed(2)
    reference = nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU())
    fused = nn.Sequential(nn.Conv2d(2, 3, 3), nn.ReLU())
    fused.load_state_dict(reference.state_dict())
    assert with_member_convolutions(fused) == 1 and type(fused[0]) is MemberConvReLU2d and type(fused[1]) is nn.Identity
    x = torch.randn(5, 2, 6, 6, requires_grad=True)
    y_ref, y_new = reference(x), fused(x)
    assert torch.equal(y_new, y_ref) and (y_new == 0).any()
    g = torch.randn_like(y_ref)
    ref = torch.autograd.grad(y_ref, (x, reference[0].weight, reference[0].bias), g)
    new = torch.autograd.grad(y_new, (x, fused[0].weight, fused[0].bias), g)
    for a, b in zip(new, ref):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_only_plain_convolutions_are_converted_and_they_keep_their_parameters():
    net = nn.Sequential(nn.Conv2d(4, 4, 3), nn.Conv2d(4, 4, 3, groups=2), nn.Conv2d(4, 4, 3, bias=False), nn.Conv2d(4, 4, 3, dilation=2))
    weight = net[0].weight
    assert with_member_convolutions(net) == 1
    assert type(net[0]) is MemberConv2d and net[0].weight is weight
    assert [type(m) for m in net[1:]] == [nn.Conv2d] * 3
    assert [name for name, _ in net.named_parameters()][:2] == ["0.weight", "0.bias"]


def test_the_population_engine_runs_the_minatar_cnn_with_member_convolutions():
    from adaptive_po.environments import make_vec_env
    from adaptive_po.population import Member, PopulationLearner

    env = make_vec_env("MinAtar/Breakout-v1", 1, 0)
    learner = PopulationLearner(
        env.observation_space, env.action_space, [Member(0), Member(1)], objective="esspo", policy="CnnPolicy",
        policy_kwargs={"features_extractor_class": "MinAtarCNN", "net_arch": []}, n_steps=8, batch_size=8, n_epochs=1,
    )
    env.close()
    assert any(type(m) is MemberConvReLU2d for m in learner._module.modules())  # the MinAtar CNN's conv, ReLU
    assert "policy.features_extractor.conv.0.weight" in learner.params


def test_the_fused_relu_gives_the_unfused_values_and_gradients_bit_for_bit():
    """Fusing the ReLU into the per-member convolution moves where it runs, not what it computes:
    the MinAtar network's outputs and gradients under vmap(grad) are the unfused ones exactly."""
    torch.manual_seed(3)
    k, b = 3, 16

    def minatar_like() -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(4, 16, 3), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 3))

    params, _ = stack_module_state([minatar_like() for _ in range(k)])
    params = {name: p.detach() for name, p in params.items()}
    unfused, fused = minatar_like(), minatar_like()
    unfused[0].__class__ = MemberConv2d  # the per-member convolution alone, its ReLU a module of its own
    assert with_member_convolutions(fused) == 1 and type(fused[0]) is MemberConvReLU2d
    x = torch.randint(0, 2, (k, b, 4, 10, 10)).float()
    y = torch.randn(k, b, 3)

    def loss(module):
        return lambda p, x, y: ((functional_call(module, p, (x,)) - y) ** 2).mean()

    assert torch.equal(vmap(lambda p, x: functional_call(fused, p, (x,)))(params, x), vmap(lambda p, x: functional_call(unfused, p, (x,)))(params, x))
    g_fused, g_unfused = vmap(grad(loss(fused)))(params, x, y), vmap(grad(loss(unfused)))(params, x, y)
    assert all(torch.equal(g_fused[name], g_unfused[name]) for name in g_unfused)
