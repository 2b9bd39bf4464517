"""A 2-D convolution that the population engine runs as one plain convolution per member.

Under :func:`torch.func.vmap` over stacked weights, PyTorch runs a convolution as one *grouped*
convolution (the members as groups), and its backward the same way. On the CPUs measured here
that is several times slower than one plain convolution per member (``make perf``'s MinAtar cell;
benchmarks/roofline.py). :class:`MemberConv2d` is an ``nn.Conv2d`` (same parameters, same forward
outside vmap) whose convolution and weight gradient carry their own vmap rules: a loop of plain
convolutions over the members, forward and backward. The input's gradient, when one is needed
(a convolution after another layer), is left to PyTorch's own batched rule.

A convolution that a ReLU follows runs as one :class:`MemberConvReLU2d`: each member's ReLU is
applied to its own output as it is made, and for a first layer the ReLU's backward mask is applied
per member just before that member's weight gradient, instead of two more passes over the whole
population's activations (``make perf``'s MinAtar cell: about 16 x 1024 x 1024 floats per pass).

Only the population engine's functional copy of a network uses it
(:func:`with_member_convolutions`); the SB3 classes keep ``nn.Conv2d``. Gradients equal the
grouped convolution's to float32 rounding (tests/test_population_cnn.py).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _pick(t: Tensor | None, dim: int | None, i: int) -> Tensor | None:
    return t if t is None or dim is None else t.select(dim, i)


class _WeightGrad(torch.autograd.Function):
    """A convolution's weight and bias gradients (``convolution_backward`` without the input's);
    under vmap one plain call per member. Given the output of a convolution followed by a ReLU
    (``relu_output``), ``grad`` is the ReLU's output gradient and is masked first, per member."""

    @staticmethod
    def forward(grad: Tensor, x: Tensor, weight: Tensor, relu_output: Tensor | None, stride: list[int], padding: list[int]) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        if relu_output is not None:
            grad = torch.ops.aten.threshold_backward(grad, relu_output, 0)
        _, gw, gb = torch.ops.aten.convolution_backward(
            grad, x, weight, [weight.shape[0]], stride, padding, [1, 1], False, [0, 0], 1, [False, True, True],
        )
        return gw, gb

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        pass  # not differentiated again

    @staticmethod
    def vmap(info: Any, in_dims: Any, grad: Tensor, x: Tensor, weight: Tensor, relu_output: Tensor | None, stride: list[int], padding: list[int]) -> Any:
        gd, xd, wd, od = in_dims[:4]
        outs = [
            _WeightGrad.apply(_pick(grad, gd, i), _pick(x, xd, i), _pick(weight, wd, i), _pick(relu_output, od, i), stride, padding)
            for i in range(info.batch_size)
        ]
        return (torch.stack([o[0] for o in outs]), torch.stack([o[1] for o in outs])), (0, 0)


class _Conv(torch.autograd.Function):
    """``F.conv2d(x, weight, bias, stride, padding)``, followed by a ReLU where ``relu``; under vmap
    one plain convolution (and its ReLU) per member, so that the ReLU runs on one member's output at
    a time, while it is in cache, not as another pass over the whole population's. For a first layer
    the ReLU's backward mask is applied per member too, just before that member's weight gradient."""

    @staticmethod
    def forward(x: Tensor, weight: Tensor, bias: Tensor, stride: list[int], padding: list[int], relu: bool) -> Tensor:  # type: ignore[override]
        out = F.conv2d(x, weight, bias, stride, padding)
        return out.relu_() if relu else out

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        x, weight, _, stride, padding, relu = inputs
        ctx.save_for_backward(x, weight, output if relu else None)
        ctx.stride, ctx.padding = stride, padding

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor, Tensor, None, None, None]:  # type: ignore[override]
        x, weight, relu_output = ctx.saved_tensors
        gx = None
        if ctx.needs_input_grad[0]:  # an inner convolution: PyTorch's own (batched) rule for the input's gradient
            if relu_output is not None:
                grad, relu_output = torch.ops.aten.threshold_backward(grad, relu_output, 0), None
            gx = torch.ops.aten.convolution_backward(grad, x, weight, None, ctx.stride, ctx.padding, [1, 1], False, [0, 0], 1, [True, False, False])[0]
        gw, gb = _WeightGrad.apply(grad, x, weight, relu_output, ctx.stride, ctx.padding)
        return gx, gw, gb, None, None, None

    @staticmethod
    def vmap(info: Any, in_dims: Any, x: Tensor, weight: Tensor, bias: Tensor, stride: list[int], padding: list[int], relu: bool) -> Any:
        xd, wd, bd = in_dims[:3]
        outs = [_Conv.apply(_pick(x, xd, i), _pick(weight, wd, i), _pick(bias, bd, i), stride, padding, relu) for i in range(info.batch_size)]
        return torch.stack(outs), 0


class MemberConv2d(nn.Conv2d):
    """``nn.Conv2d`` (with a bias, dilation 1, one group, zero padding) whose convolution runs one
    plain convolution per member under vmap."""

    def forward(self, x: Tensor) -> Tensor:
        return _Conv.apply(x, self.weight, self.bias, list(self.stride), list(self.padding), False)


class MemberConvReLU2d(MemberConv2d):
    """A :class:`MemberConv2d` followed by its ReLU, in one operation (the ReLU module after it is
    replaced by ``nn.Identity``): the same values and gradients as ``nn.Conv2d`` then ``nn.ReLU``."""

    def forward(self, x: Tensor) -> Tensor:
        return _Conv.apply(x, self.weight, self.bias, list(self.stride), list(self.padding), True)


def _convertible(conv: nn.Conv2d) -> bool:
    return (type(conv) is nn.Conv2d and conv.bias is not None and conv.groups == 1 and tuple(conv.dilation) == (1, 1)
            and conv.padding_mode == "zeros" and not isinstance(conv.padding, str))


def with_member_convolutions(module: nn.Module) -> int:
    """Turn every plain ``nn.Conv2d`` of ``module`` (bias, one group, no dilation, zero padding)
    into a :class:`MemberConv2d` sharing its parameters, in place; one that an ``nn.ReLU`` follows
    in an ``nn.Sequential`` becomes a :class:`MemberConvReLU2d` and the ReLU an ``nn.Identity``
    (no parameters move, so their names stay). Returns how many convolutions were converted."""
    count = 0
    children = list(module.named_children())
    for at, (name, child) in enumerate(children):
        if isinstance(child, nn.Conv2d) and _convertible(child):
            after = children[at + 1] if isinstance(module, nn.Sequential) and at + 1 < len(children) else None
            fused = after is not None and type(after[1]) is nn.ReLU
            kind = MemberConvReLU2d if fused else MemberConv2d
            member = kind.__new__(kind)
            member.__dict__ = child.__dict__  # the same parameters and settings, another forward
            setattr(module, name, member)
            if fused:
                setattr(module, after[0], nn.Identity())
            count += 1
        else:
            count += with_member_convolutions(child)
    return count
