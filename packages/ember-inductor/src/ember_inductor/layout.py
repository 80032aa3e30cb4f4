"""Layout planning: the pass that decides, before lowering, which memory layout the graph's
realized values, its library calls' operands and results, and its outputs get. Lowering consults
the plan (`LoweringContext.layout`) and holds no layout policy of its own; the wrapper calls
`fit` on the extern results the plan marks.

    >>> import torch, torch.fx as fx
    >>> from ember_inductor.layout import plan_layouts
    >>> g = fx.Graph(); x = g.placeholder("x")
    >>> _ = g.output((g.call_function(torch.ops.ember_prims.neg.default, (x,)),))
    >>> plan_layouts(fx.GraphModule(torch.nn.Module(), g), "auto")
    LayoutPlan(channels_last=False, saved_from=None)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.fx as fx

from ember_inductor.ir import IRNode, Reduction, contiguous_strides
from ember_inductor.sizes import as_sizes, is_static, product

# Note [channels-last convolutions]
#     Convolution libraries (oneDNN on the CPU, cuDNN on the GPU) run 2-D convolutions faster on
#     (N, H, W, C) memory than on (N, C, H, W): on this project's 2-core CPU oneDNN runs the
#     small ResNet's convolutions 10-20 % faster channels-last, forward and backward (and ember's
#     step gains more: tools/conv_layout_bench.py). In a graph with a 2-D convolution, every 4-D
#     value that is realized (the convolutions' inputs, a residual stream) is written
#     channels-last: through a permuted view, so its kernel stores contiguously in (N, H, W, C)
#     order, and every consumer reads that one buffer. A convolution's activation result (its
#     output; the input gradient of its backward) is then channels-last too (the wrapper's
#     `fit` copies if a library ever answers otherwise), and the kernels after it (batch norm,
#     ReLU, the residual add) read it through its strides. A convolution's weight is handed to
#     the library channels-last too (Note [channels-last weights]); weight gradients keep the
#     recorded layout.
#     A graph output keeps its recorded layout (a copy where a channels-last buffer would
#     escape), except the outputs saved for the backward (Note [saved outputs]): those leave
#     channels-last, and ember_autograd compiles the backward for the layouts it receives.
#     `conv_layout="auto"` (the default) chooses this on both backends. On the Triton backend it
#     used to make resnet50's training step slower on an H100 (0.77x -> 0.60x eager at batch
#     32): batch norm was cuDNN's extern, whose NCHW outputs `fit` copied back (5.9 ms a step).
#     Batch norm now decomposes (Note [vendor batch norm]), and its per-channel statistics over
#     channels-last memory are column reductions, split in two kernels when the rows are few
#     (Note [split reductions]).
#
# Note [channels-last weights]
#     Given a channels-last activation, cuDNN and oneDNN convert an (O, I, kh, kw) weight to
#     channels-last themselves, on every call: in ATen a `contiguous(channels_last)` (an
#     allocation and a copy kernel, ~25 µs of host). resnet50 b32's inference made 17 such copies
#     per call on the H100/H200 (the 3x3 and 7x7 weights; a 1x1 or depthwise weight is the same
#     memory in both layouts), 0.5 ms of its 4.6 ms of host time (torch.profiler, 2026-11-28).
#     The plan now relays the weight as it relays the activation: the copy is an ordinary
#     kernel of the graph, launched by the wrapper's fast path, and horizontal fusion may put
#     several in one launch. Weights are never cached across calls (an in-place change through
#     `.data` bumps no version counter, so a cache could not tell it was stale).
#
# Note [saved outputs]
#     The contract with ember_autograd: a training forward's output node carries
#     meta["ember_saved_outputs"] = k, and the outputs from position k on are the values saved
#     for the backward (the user's outputs and the new values of mutated inputs come first).
#     Those are the only outputs whose layout is the forward compiler's choice: ember_autograd
#     compiles the backward for the strides they arrive in. Every other output, and every output
#     of a graph without the key, keeps the layout its node's meta["val"] recorded (eager's).

CONV_ACTIVATION_ARGS = {
    torch.ops.aten.convolution.default: (0,),                 # input
    torch.ops.aten.convolution_backward.default: (0, 1),      # grad_output, input
}
CONV_WEIGHT_ARG = {  # Note [channels-last weights]
    torch.ops.aten.convolution.default: 1,
    torch.ops.aten.convolution_backward.default: 2,
}

# Externs whose result layout does not depend on their operands' strides (a fresh contiguous
# product): only these may receive a permuted operand as a strided view, and their results need
# no `fit`. Others (attention kernels) may lay their output out after their inputs, which the
# recorded strides would not describe.
LAYOUT_FREE_EXTERNS = frozenset({torch.ops.aten.mm.default, torch.ops.aten.bmm.default})

# Note [attention operands with a dense last dimension]
#     ATen's attention kernels (flash, memory-efficient, the CPU flash) read q, k, v, the output
#     and its gradient as if their last dimension had stride 1: the dispatcher checks it before
#     choosing them, the kernels do not, and a trace chose them for eager's layouts. A buffer the
#     inductor lays out otherwise (a value saved channels-last by the forward, read by the
#     backward as an input: torchvision's ViT's q, k, v) is copied to the recorded layout first.
_aten = torch.ops.aten
DENSE_LAST_DIM_EXTERNS = frozenset({
    _aten._scaled_dot_product_efficient_attention.default,
    _aten._scaled_dot_product_efficient_attention_backward.default,
    _aten._scaled_dot_product_flash_attention.default,
    _aten._scaled_dot_product_flash_attention_backward.default,
    _aten._scaled_dot_product_flash_attention_for_cpu.default,
    _aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
})

SAVED_OUTPUTS = "ember_saved_outputs"  # the output node's meta key (Note [saved outputs])


@dataclass(frozen=True)
class LayoutPlan:
    """The layouts of one graph. channels_last: 4-D values are realized channels-last (Note
    [channels-last convolutions]). saved_from: outputs from this position on are saved for the
    backward and may leave in the layout the plan gave them (Note [saved outputs]); None: none."""

    channels_last: bool = False
    saved_from: int | None = None

    def realized_strides(self, value: IRNode) -> tuple | None:
        """The strides a lazy value is realized with, where not contiguous."""
        if self.channels_last and _channels_last_candidate(value):
            return channels_last_strides(value.sizes)
        return None

    def relaid_operands(self, op, args) -> tuple[int, ...]:
        """The positions of `op`'s operands laid out channels-last before the call: a 2-D
        convolution's activations; its first result is then channels-last too."""
        positions = CONV_ACTIVATION_ARGS.get(op, ()) if self.channels_last else ()
        if positions and all(isinstance(args[i], IRNode) and len(args[i].sizes) == 4 for i in positions):
            return positions
        return ()

    @staticmethod
    def relaid_weight(op, args) -> int | None:
        """The position of a relaid convolution's 4-D weight (Note [channels-last weights])."""
        i = CONV_WEIGHT_ARG.get(op)
        if i is not None and isinstance(args[i], IRNode) and len(args[i].sizes) == 4:
            return i
        return None

    @staticmethod
    def relaid_strides(value: IRNode) -> tuple:
        """The strides of a relaid convolution operand: channels-last."""
        return channels_last_strides(value.sizes)

    def recorded_operands(self, op, args) -> bool:
        """Whether `op`'s tensor operands get the layout the graph recorded (eager's) rather than
        the plan's: every extern of a channels-last graph but the convolutions (Note [externs see
        eager's layouts])."""
        return self.channels_last and not self.relaid_operands(op, args)

    def result_strides(self, relaid: bool, item: int, val: torch.Tensor) -> tuple:
        """An extern result's strides: channels-last for a relaid convolution's activation
        result, else the recorded ones."""
        return channels_last_strides(val.shape) if relaid and item == 0 else as_sizes(val.stride())

    @staticmethod
    def fits_result(op) -> bool:
        """Whether the wrapper checks `op`'s result against the planned strides (`fit`)."""
        return op not in LAYOUT_FREE_EXTERNS

    @staticmethod
    def strided_operands(op) -> bool:
        """Whether `op` may read a permuted operand as a strided view (BLAS reads either)."""
        return op in LAYOUT_FREE_EXTERNS

    @staticmethod
    def dense_last_dim(op, value) -> bool:
        """Whether `op` needs operand `value` (4-D) with a last dimension of stride 1 (Note
        [attention operands with a dense last dimension])."""
        return op in DENSE_LAST_DIM_EXTERNS and len(value.sizes) == 4

    def leaves_as_planned(self, position: int) -> bool:
        """Whether output `position` may leave in the plan's layout (saved for the backward)."""
        return self.saved_from is not None and position >= self.saved_from


# Note [channels-last by the convolutions' size]
#     Channels-last saves GPU time in the convolutions (cuDNN's NHWC kernels) and costs host time
#     (the weights' copies, the graph's input and outputs relaid). On the GPU a small
#     convolution's host work (~40 µs through ATen and cuDNN) dwarfs its GPU time, so at batch 1
#     the saving is not there to take: resnet50 b1 inference on the H200 took 3.19 ms a call
#     channels-last against 2.72 ms in eager's layout (one process, interleaved, 2026-11-28),
#     while at batch 32 channels-last was the faster (3.96 against 4.28 ms, the GPU busy
#     2.5 ms against 3.3). So `conv_layout="auto"` on CUDA chooses channels-last only when the
#     graph's 2-D convolutions average at least CHANNELS_LAST_MIN_FLOPS each (resnet50: 0.15
#     GFLOP at batch 1, 5 GFLOP at batch 32); a size it cannot read (symbolic) counts as large.
#     On the CPU, oneDNN gains from channels-last at every size measured: always. A graph that
#     replays as a CUDA graph (`cudagraphs`, mode="reduce-overhead") has no host work per
#     convolution left to save, so there it is channels-last at every size too: resnet50 b1
#     replayed in 0.79 ms a call in eager's layout against torch.compile's 0.60 (H200, 2026-11-28).
CHANNELS_LAST_MIN_FLOPS = 1e9


def plan_layouts(gm: fx.GraphModule, conv_layout: str, cudagraphs: bool = False) -> LayoutPlan:
    """The layout plan of a prims-level graph. `conv_layout` (InductorOptions): "channels_last"
    lays out 2-D convolutions' activations channels-last if the graph has any; "auto" too, but on
    CUDA only for large enough convolutions unless the graph replays as a CUDA graph (Note
    [channels-last by the convolutions' size]); "preserve" keeps every recorded layout."""
    output = gm.graph.output_node()
    saved = output.meta.get(SAVED_OUTPUTS)
    convs = _conv_2d_flops(gm)
    if conv_layout == "auto" and convs is not None and convs[0] == "cuda" and not cudagraphs:
        flops = convs[1]
        channels_last = None in flops or sum(flops) / len(flops) >= CHANNELS_LAST_MIN_FLOPS
    else:
        channels_last = conv_layout in ("auto", "channels_last") and convs is not None
    return LayoutPlan(channels_last=channels_last, saved_from=saved)


def channels_last_strides(sizes) -> tuple[int, ...]:
    n, c, h, w = as_sizes(sizes)
    s_n, s_h, s_w, s_c = contiguous_strides((n, h, w, c))
    return (s_n, s_c, s_h, s_w)


def _channels_last_candidate(node: IRNode) -> bool:
    """A 4-D lazy value (not a reduction) with channels and pixels: realized channels-last."""
    return (not isinstance(node, Reduction) and len(node.sizes) == 4
            and _above_one(node.sizes[1]) and _above_one(product(node.sizes[2:])))


def _above_one(n) -> bool:
    # a symbolic size counts as above one: the layout is a heuristic, correct for any size
    return not is_static(n) or int(n) > 1


def _conv_2d_flops(gm: fx.GraphModule) -> tuple | None:
    """(device type, [FLOPs of each 2-D convolution or its backward, None where a size is
    symbolic]), or None without any."""
    device, flops = None, []
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target in CONV_ACTIVATION_ARGS:
            val = n.args[0].meta.get("val") if isinstance(n.args[0], fx.Node) else None
            if isinstance(val, torch.Tensor) and val.dim() == 4:
                device = device or val.device.type
                flops.append(_flops(n))
    return (device, flops) if flops else None


def _flops(n: fx.Node) -> float | None:
    """2 x output elements x (input channels / groups) x kernel area, of a convolution (its
    backward: of the forward it differentiates); None if a size is not a plain int."""
    if n.target is torch.ops.aten.convolution.default:
        out, weight = n.meta.get("val"), n.args[1]
    else:  # convolution_backward(grad_output, input, weight, ...): grad_output is the forward's output
        out, weight = n.args[0].meta.get("val") if isinstance(n.args[0], fx.Node) else None, n.args[2]
    w = weight.meta.get("val") if isinstance(weight, fx.Node) else None
    if not isinstance(out, torch.Tensor) or not isinstance(w, torch.Tensor):
        return None
    sizes = (*out.shape, *w.shape)
    if not all(type(d) is int for d in sizes):  # a symbolic size
        return None
    return 2.0 * math.prod(out.shape) * w.shape[1] * w.shape[2] * w.shape[3]
