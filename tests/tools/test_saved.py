"""Saved tensors' states (alive, freed, stale) and the drawing that shows them."""
import torch

from helpers.course.models import make_inputs, make_two_models, two_losses
from helpers.tools import graph
from helpers.tools.graph import import_torchviz, named_parameters
from helpers.tools.saved import State, count_states, graph_nodes, saved_tensors, saved_tensors_of
from helpers.tools.saved_graph import draw_saved_graph


def _setup():
    m1, m2 = make_two_models()
    x1, x2 = make_inputs()
    o1, o2 = m1(x1), m2(x2)
    l1, l2 = two_losses(o1, o2)
    return m1, m2, o1, o2, l1, l2, named_parameters(M1=m1, M2=m2)


def test_everything_is_alive_after_the_forward_pass():
    *_, l1, l2, params = _setup()
    states = count_states(saved_tensors((l1, l2), params))
    assert states[State.ALIVE] > 0 and states[State.FREED] == states[State.STALE] == 0


def test_a_backward_frees_what_it_visits_and_nothing_else():
    *_, l1, l2, params = _setup()
    l2.backward()
    alive = [s for s in saved_tensors((l1, l2), params) if s.state is State.ALIVE]
    assert [s.node_name for s in alive] == ["PowBackward0"]  # own(O1): only L1 goes there
    freed = [s for s in saved_tensors(l2, params) if s.state is State.FREED]
    assert freed and all(s.shape is None and s.state_label == "freed" for s in freed)


def test_retain_graph_keeps_every_saved_tensor_alive():
    *_, l1, l2, params = _setup()
    before = count_states(saved_tensors((l1, l2), params))
    l1.backward(retain_graph=True)
    assert count_states(saved_tensors((l1, l2), params)) == before


def test_an_in_place_step_makes_the_saved_head_weight_stale_and_names_it():
    m1, m2, o1, o2, l1, l2, params = _setup()
    torch.optim.SGD(m2.parameters(), lr=0.1).zero_grad()
    l2.backward(retain_graph=True)
    torch.optim.SGD(m2.parameters(), lr=0.1).step()
    stale = [s for s in saved_tensors((l1, l2), params) if s.state is State.STALE]
    assert len(stale) == 1
    (saved,) = stale
    assert (saved.parameter, saved.shape, saved.attribute) == ("M2.2.weight", (64, 1), "mat2")
    assert saved.state_label == f"stale v{saved.version_saved}->v{saved.version_now}"
    assert saved.version_now == m2[2].weight._version == saved.version_saved + 1


def test_tensors_a_node_did_not_need_to_save_are_left_out():
    weight = torch.ones(3, requires_grad=True)
    product = weight * torch.arange(3.0)  # the data needs no gradient: `self` is not saved
    assert [s.attribute for s in saved_tensors_of(product.grad_fn, {"weight": weight})] == ["other"]


def test_graph_nodes_lists_each_node_once():
    *_, l1, l2, _ = _setup()
    nodes = graph_nodes((l1, l2))
    assert len(nodes) == len({id(n) for n in nodes}) == 29


def test_drawing_marks_freed_and_stale_without_relying_on_color():
    m1, m2, o1, o2, l1, l2, params = _setup()
    l1.backward(inputs=list(m1.parameters()))  # frees L1's nodes down to M1, never visits M2
    with torch.no_grad():
        m2[2].weight.add_(1)
    states = count_states(saved_tensors((l1, l2), params))
    assert states[State.FREED] > 0 and states[State.STALE] == 1
    picture = draw_saved_graph({"L1": l1, "L2": l2}, {"M1": o1, "M2": o2}, params)
    assert "stale v1->v2" in picture.text and "M2.2.weight" in picture.text
    source = picture.digraph.source
    assert "stale v1-&gt;v2" in source or "stale v1->v2" in source
    assert "dashed" in source and "peripheries=2" in source and "cluster_M1" in source and "legend" in source


def test_drawing_a_freed_graph_works_where_torchviz_show_saved_raises():
    *_, l1, l2, params = _setup()
    l2.backward()
    try:
        import_torchviz().make_dot(l2, params=params, show_saved=True)
        raise AssertionError("torchviz drew a freed graph: update notebook 01")
    except RuntimeError as error:
        assert "backward through the graph a second time" in str(error)
    picture = draw_saved_graph({"L1": l1, "L2": l2}, None, params)
    assert "freed" in picture.text and picture.digraph is not None


def test_without_dot_the_saved_graph_is_text(monkeypatch, tmp_path):
    *_, l1, l2, params = _setup()
    monkeypatch.setenv("PATH", str(tmp_path))
    picture = draw_saved_graph({"L1": l1}, None, params)
    bundle = picture._repr_mimebundle_()
    assert "image/svg+xml" not in bundle and "alive v1" in bundle["text/html"]
    assert not graph.dot_available()


def test_a_stale_tensor_is_named_where_torch_has_no_saved_tensor_data():
    """torch 2.4-2.6: the owner is the parameter at that version and shape that the node reads, even when another
    parameter elsewhere has the same version and shape (both heads are [1, 64], both stepped once)."""
    from helpers.tools.saved import _read, _stale

    m1, m2, o1, o2, l1, l2, params = _setup()
    with torch.no_grad():
        m1[2].weight.add_(1)
        m2[2].weight.add_(1)
    assert m1[2].weight._version == m2[2].weight._version
    node = o2.grad_fn  # M2's head: AddmmBackward0
    _, error, _ = _read(node, "mat2")

    class OldSavedTensor:  # torch 2.4-2.6: SavedTensor has no .data
        pass

    names = {id(tensor): name for name, tensor in params.items()}
    saved = _stale(node, "mat2", OldSavedTensor(), error, params, names)
    assert (saved.state, saved.parameter, saved.shape) == (State.STALE, "M2.2.weight", (64, 1))
    by_version_alone = _stale(node, "mat2", OldSavedTensor(), error, params, names={})
    assert by_version_alone.parameter is None, "two parameters match by version and shape: no guess"
