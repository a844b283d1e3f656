"""Issue 26, the drawings: checkpointed and compiled regions drawn as one labelled box without changing anything,
draw_saved_graph's module view on a 2000-node graph in about a second, and arguments in the wrong roles refused
with the right call."""
import hashlib
import time
import warnings
from typing import Any, Callable, Dict, Tuple

import graphviz
import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from helpers.tools import graph
from helpers.tools.graph import FULL_DRAWING_MAX_NODES, draw_graph, draw_module_graph, named_parameters
from helpers.tools.regions import COMPILED, NON_REENTRANT_CHECKPOINT, REENTRANT_CHECKPOINT
from helpers.tools.saved import graph_nodes
from helpers.tools.saved_graph import draw_saved_graph

needs_dot = pytest.mark.skipif(not graph.dot_available(), reason="graphviz dot is not installed")
KINDS = {"reentrant": REENTRANT_CHECKPOINT, "non-reentrant": NON_REENTRANT_CHECKPOINT, "compiled": COMPILED}


class Block(nn.Module):
    """Linear, BatchNorm (buffers that a recomputation would move), Dropout (RNG), ReLU, Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.2), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def step_code(kind: str) -> Tuple[Dict[str, nn.Module], torch.Tensor, torch.Tensor]:
    """A stem, the block run checkpointed or compiled, a head: the models, the block's output and the loss."""
    torch.manual_seed(0)
    models = {"stem": nn.Linear(3, 4), "block": Block(), "head": nn.Linear(4, 1)}
    hidden = models["stem"](torch.randn(6, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "compiled":
            block_out = torch.compile(models["block"], backend="aot_eager")(hidden)
        else:
            block_out = checkpoint(models["block"], hidden, use_reentrant=kind == "reentrant")
    return models, block_out, models["head"](block_out).pow(2).mean()


def state_of(models: Dict[str, nn.Module]) -> Dict[str, Any]:
    """Every tensor and buffer (values, version counters, grads), every module flag, and the RNG state."""
    state: Dict[str, Any] = {"rng": hashlib.sha256(torch.get_rng_state().numpy().tobytes()).hexdigest()}
    for model_name, model in models.items():
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            key = f"{model_name}.{name}"
            state[key] = (tensor.detach().clone(), tensor._version,
                          None if tensor.grad is None else tensor.grad.clone())
        for name, module in model.named_modules():
            state[f"{model_name}.{name}:flags"] = (module.training, dict(vars(module).get("_forward_hooks", {})))
    return state


def assert_same_state(before: Dict[str, Any], after: Dict[str, Any]) -> None:
    assert before.keys() == after.keys()
    for key, old in before.items():
        new = after[key]
        if isinstance(old, tuple) and old and isinstance(old[0], torch.Tensor):
            assert torch.equal(old[0], new[0]) and old[1] == new[1], f"{key} changed"
            assert (old[2] is None) == (new[2] is None) and (old[2] is None or torch.equal(old[2], new[2])), key
        else:
            assert old == new, f"{key} changed"


DRAWINGS: Dict[str, Callable[[torch.Tensor, torch.Tensor, Dict[str, nn.Module]], Any]] = {
    "draw_graph": lambda loss, out, models: draw_graph(loss, models),
    "draw_graph module view": lambda loss, out, models: draw_graph(loss, models, full=False),
    "draw_saved_graph": lambda loss, out, models: draw_saved_graph(loss, {"block": out}, models),
    "draw_saved_graph module view": lambda loss, out, models: draw_saved_graph(loss, None, models, full=False),
    "draw_module_graph": lambda loss, out, models: draw_module_graph(loss, models),
}


@pytest.mark.parametrize("when", ["before backward", "after backward", "after a step"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_an_opaque_region_is_one_labelled_box_and_drawing_changes_nothing(kind: str, when: str) -> None:
    models, block_out, loss = step_code(kind)
    if when != "before backward":
        # retain_graph=True keeps a non-reentrant checkpoint's packed tensors: reading one would recompute the block
        loss.backward(retain_graph=True)
    if when == "after a step":
        torch.optim.Adam([p for m in models.values() for p in m.parameters()], lr=0.1).step()
    counted = models["block"].net[1].num_batches_tracked.item()
    for name, draw in DRAWINGS.items():
        before = state_of(models)
        picture = draw(loss, block_out, models)
        assert_same_state(before, state_of(models))
        assert isinstance(picture.digraph, graphviz.Digraph), f"{name}: {picture.problem}"
        assert KINDS[kind] in picture.digraph.source, f"{name}: no box labelled {KINDS[kind]!r}"
        assert KINDS[kind] in picture.text, name
        if graph.dot_available():
            assert KINDS[kind] in picture.svg(), name
        assert_same_state(before, state_of(models))
    assert models["block"].net[1].num_batches_tracked.item() == counted, "a drawing re-ran the BatchNorm"


@pytest.mark.parametrize("kind", list(KINDS))
def test_after_a_backward_that_freed_the_graph_every_region_still_draws(kind: str) -> None:
    """Without retain_graph the buffers are freed: torchviz raised here on the checkpoint's and the compiled node.
    A non-reentrant checkpoint's freed nodes no longer carry its hooks: they are drawn as ordinary nodes."""
    models, block_out, loss = step_code(kind)
    loss.backward()
    torch.optim.SGD([p for m in models.values() for p in m.parameters()], lr=0.1).step()
    for name, draw in DRAWINGS.items():
        before = state_of(models)
        picture = draw(loss, block_out, models)
        assert_same_state(before, state_of(models))
        assert isinstance(picture.digraph, graphviz.Digraph), f"{name}: {picture.problem}"
        if kind != "non-reentrant":
            assert KINDS[kind] in picture.digraph.source, name
        if graph.dot_available():
            assert picture.svg() is not None, name


def test_a_non_reentrant_region_is_one_box_holding_its_packed_nodes() -> None:
    models, block_out, loss = step_code("non-reentrant")
    source = draw_graph(loss, models).digraph.source
    assert source.count(NON_REENTRANT_CHECKPOINT) == 1, "one box, not one per node"
    assert "NativeBatchNormBackward0" not in source.replace("NativeBatchNormBackward0\\n", "").split(
        NON_REENTRANT_CHECKPOINT)[0], "the BatchNorm node is inside the box, not drawn on its own"
    for parameter in ("block.net.0.weight", "block.net.4.bias", "stem.weight", "head.weight"):
        assert parameter in source, f"{parameter}: the parameters stay drawn, feeding the box"


def test_the_region_box_is_drawn_where_torchviz_raised() -> None:
    """The cause: torchviz reads a custom node's ``saved_tensors`` (CheckpointFunctionBackward,
    CompiledFunctionBackward), which raises once a backward freed them."""
    torchviz = graph.import_torchviz()
    if torchviz is None:
        pytest.skip("torchviz is not installed")
    models, _, loss = step_code("reentrant")
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torchviz.make_dot(loss, params=named_parameters(**models))
    assert REENTRANT_CHECKPOINT in draw_graph(loss, models).digraph.source


# ---------------------------------------------------------------- draw_saved_graph's module view, fast


def deep_transformer() -> Tuple[torch.Tensor, torch.Tensor, Dict[str, nn.Module]]:
    """A 24-layer nn.TransformerEncoder with dropout: about 1800 autograd nodes."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 24, enable_nested_tensor=False)
    out = encoder(torch.randn(2, 5, 32))
    return out.pow(2).mean(), out, {"enc": encoder}


@needs_dot
def test_a_2000_node_graph_is_drawn_as_the_module_view_in_about_a_second() -> None:
    loss, out, models = deep_transformer()
    nodes = len(graph_nodes(loss))
    assert nodes > 1700 and nodes > FULL_DRAWING_MAX_NODES
    seconds = []
    for _ in range(2):
        start = time.perf_counter()
        picture = draw_saved_graph({"loss": loss}, {"enc": out}, models)
        svg = picture.svg()
        seconds.append(time.perf_counter() - start)
    print(f"draw_saved_graph on {nodes} nodes: {min(seconds):.2f} s (the issue measured 5.6-7.3 s for the full drawing)")
    assert min(seconds) < 5.0, f"{min(seconds):.2f} s"
    assert svg is not None and f"{nodes} autograd nodes" in picture.note and "full=True" in svg
    assert "enc.layers.23" in picture.text and "saved:" in picture.text
    assert len(picture.text.splitlines()) < 200


def test_the_module_view_counts_saved_tensors_and_names_a_stale_weight() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    loss = model(torch.randn(5, 3)).sum()
    with torch.no_grad():
        model[2].weight.add_(1.0)  # a step before backward: the saved weight is stale
    picture = draw_saved_graph(loss, None, {"M": model}, full=False)
    assert "M.2.weight stale v1->v2" in picture.text
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    loss = model(torch.randn(5, 3)).sum()
    loss.backward()
    assert "stale" not in draw_saved_graph(loss, None, {"M": model}, full=False).text
    assert "freed" in draw_saved_graph(loss, None, {"M": model}, full=False).text


def test_below_the_threshold_every_node_is_drawn_as_before() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    out = model(torch.randn(5, 3))
    picture = draw_saved_graph({"loss": out.sum()}, {"M": out}, {"M": model})
    assert picture.note is None and "AddmmBackward0" in picture.text and "cluster_M" in picture.digraph.source


# ---------------------------------------------------------------- arguments in the wrong roles


def gan() -> Tuple[nn.Module, nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    generator, discriminator = nn.Sequential(nn.Linear(2, 3)), nn.Sequential(nn.Linear(3, 1))
    fake = generator(torch.randn(4, 2))
    return generator, discriminator, fake, discriminator(fake).mean()


def test_draw_saved_graph_in_draw_graphs_order_is_refused_with_the_right_call() -> None:
    generator, _, _, loss = gan()
    picture = draw_saved_graph(loss, {"G": generator})
    assert picture.digraph is None and picture.mistake is not None
    assert 'draw_saved_graph(loss, params={"G": G})' in picture.mistake and "modules" in picture.mistake
    assert "Not drawn" in picture._repr_mimebundle_()["text/html"]
    assert 'params={"G": G}' in str(picture)
    right = draw_saved_graph(loss, params={"G": generator})  # the call it spells out: the parameter names are back
    assert right.mistake is None and "G.0.weight" in right.text


def test_modules_where_the_outputs_go_are_refused_by_every_drawing() -> None:
    generator, discriminator, fake, loss = gan()
    models = {"G": generator, "D": discriminator}
    for picture in (draw_graph(models, loss), draw_module_graph(models, loss), draw_saved_graph(models, loss)):
        assert picture.digraph is None and '(loss, {"G": G, "D": D})' in picture.mistake


def test_model_outputs_where_the_models_go_are_refused_with_the_right_call() -> None:
    generator, discriminator, fake, loss = gan()
    for draw in (draw_graph, draw_module_graph):
        picture = draw({"d_loss": loss}, {"G": fake})  # draw_saved_graph's order: model outputs second
        assert picture.mistake is not None and 'draw_saved_graph({"d_loss": d_loss}, {"G": G_output}, {"G": G})' \
            in picture.mistake, picture.mistake
    picture = draw_graph(loss, {"G": fake}, {"G": generator})  # all three in draw_saved_graph's order
    assert picture.mistake is not None
    picture = draw_saved_graph(loss, None, {"G": fake})
    assert picture.mistake is not None and 'draw_saved_graph(loss, {"G": G_output}, {"G": G})' in picture.mistake
    picture = draw_saved_graph(loss, named_parameters(G=generator))  # parameters where the model outputs go
    assert picture.mistake is not None and "params=" in picture.mistake
    for right in (draw_graph(loss, {"G": generator, "D": discriminator}),
                  draw_saved_graph(loss, {"G": fake}, {"G": generator, "D": discriminator})):
        assert right.mistake is None and "D.0.weight" in right.text


def test_a_compiled_region_says_whose_parameters_it_reads_and_the_text_marks_every_region_node() -> None:
    models, block_out, loss = step_code("compiled")
    text = draw_module_graph(loss, models).text
    assert "reads the parameters of block.net.0, block.net.1, block.net.4" in text, text
    assert "stem (Linear)" in text and "head (Linear)" in text
    models, block_out, loss = step_code("non-reentrant")
    lines = graph.graph_as_text(loss, models).splitlines()
    marked = [line.split()[1] for line in lines if NON_REENTRANT_CHECKPOINT in line]
    # the block's nodes that saved tensors (Dropout's is MulBackward0); not the stem's and head's Addmm
    assert sorted(marked) == ["AddmmBackward0", "AddmmBackward0", "MulBackward0", "NativeBatchNormBackward0",
                              "ReluBackward0"], marked


def test_a_third_argument_in_draw_saved_graphs_order_is_refused() -> None:
    generator, _, fake, loss = gan()
    picture = draw_graph(loss, None, {"G": generator})
    assert picture.mistake is not None and "full is True, False or None" in picture.mistake


def test_a_checkpointed_block_with_a_skip_connection_is_one_box() -> None:
    """The skip connection's add saves nothing: it joins the block's two halves, which stay one region."""
    class Residual(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.norm1 = nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3)
            self.conv2, self.norm2 = nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.norm2(self.conv2(torch.relu(self.norm1(self.conv1(x))))) + x)

    torch.manual_seed(0)
    stem, block, head = nn.Conv2d(3, 3, 1), Residual(), nn.Linear(48, 1)
    hidden = checkpoint(block, stem(torch.randn(2, 3, 4, 4)), use_reentrant=False)
    loss = head(hidden.flatten(1)).pow(2).mean()
    models = {"stem": stem, "block": block, "head": head}
    counted = block.norm1.num_batches_tracked.item()
    assert draw_graph(loss, models).digraph.source.count(NON_REENTRANT_CHECKPOINT) == 1
    saved = draw_saved_graph({"loss": loss}, {"block": hidden}, models).digraph.source
    assert saved.count(NON_REENTRANT_CHECKPOINT) == 1
    assert block.norm1.num_batches_tracked.item() == counted
