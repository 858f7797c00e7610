"""One stored attention layer for several BERT layers (cross-layer sharing, `fit_method="invariant"`): fitted to
the layers' per-head score forms and value paths (`representative_layer`), which averaging their weights is not."""

import pytest
import torch
from test_convert import inputs, tiny_bert

from sharedbert.conversion.bert import from_bert
from sharedbert.conversion.fitting import representative_layer

HIDDEN, HEADS = 32, 4
HEAD_DIM = HIDDEN // HEADS


def layer_rows(bert, layer):
    attention = bert.encoder.layer[layer].attention
    rows = [torch.cat([m.weight, m.bias[:, None]], 1).detach() for m in (attention.self.query, attention.self.key,
                                                                        attention.self.value)]
    return (*rows, attention.output.dense.weight.detach())


def forms_and_paths(q, k, v, o):
    blocks = [slice(h * HEAD_DIM, (h + 1) * HEAD_DIM) for h in range(HEADS)]
    return ([q[b].double().T @ k[b].double() for b in blocks], [o[:, b].double() @ v[b].double() for b in blocks])


def test_copies_of_one_layer_are_reproduced_exactly():
    q, k, v, o = layer_rows(tiny_bert(), 0)
    (q2, k2, v2, o2), kept = representative_layer([q, q, q], [k, k, k], [v, v, v], [o, o, o], HEADS)
    assert kept == pytest.approx(1.0, abs=1e-9)
    for ours, theirs in zip(forms_and_paths(q2, k2, v2, o2), forms_and_paths(q, k, v, o)):
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_each_heads_form_and_path_are_the_best_rank_head_dim_fit_of_the_layers_mean():
    bert = tiny_bert(num_hidden_layers=3)
    layers = [layer_rows(bert, i) for i in range(3)]
    (q, k, v, o), kept = representative_layer(*[[rows[j] for rows in layers] for j in range(4)], HEADS)
    fitted = forms_and_paths(q, k, v, o)
    per_layer = [forms_and_paths(*rows) for rows in layers]
    for kind in (0, 1):
        for h in range(HEADS):
            mean = torch.stack([p[kind][h] for p in per_layer]).mean(0)
            u, s, vh = torch.linalg.svd(mean)
            torch.testing.assert_close(fitted[kind][h], (u[:, :HEAD_DIM] * s[:HEAD_DIM]) @ vh[:HEAD_DIM], atol=1e-5,
                                       rtol=1e-4)
    # It keeps more of what the layers compute than their averaged weights do (the form of their means).
    averaged = forms_and_paths(*[torch.stack([rows[j] for rows in layers]).mean(0) for j in range(4)])
    lost_by_averaging = sum(float((averaged[kind][h] - p[kind][h]).pow(2).sum())
                            for p in per_layer for kind in (0, 1) for h in range(HEADS))
    total = sum(float(p[kind][h].pow(2).sum()) for p in per_layer for kind in (0, 1) for h in range(HEADS))
    assert 0 < kept < 1 and kept > 1 - lost_by_averaging / total


def test_an_invariant_conversion_to_shared_layers_of_identical_bert_layers_computes_what_the_bert_computes():
    bert = tiny_bert(num_hidden_layers=3)
    with torch.no_grad():  # every layer a copy of the first: one stored layer can compute the BERT exactly
        for layer in bert.encoder.layer[1:]:
            layer.load_state_dict(bert.encoder.layer[0].state_dict())
    model, report = from_bert(bert, attention_type="standard", layer_sharing="all", num_unique_layers=1,
                              fit_method="invariant", return_report=True)
    x = inputs()
    with torch.no_grad():
        torch.testing.assert_close(model(**x).last_hidden_state, bert(**x).last_hidden_state, atol=1e-4, rtol=1e-4)
    assert report[0].retained_energy == pytest.approx(1.0, abs=1e-6)


def test_the_invariant_conversion_writes_the_fitted_output_projection_and_reports_what_the_merge_loses():
    bert = tiny_bert(num_hidden_layers=4)
    model, report = from_bert(bert, attention_type="standard", layer_sharing="attention", num_unique_layers=1,
                              fit_method="invariant", return_report=True)
    layers = [layer_rows(bert, i) for i in range(4)]
    expected, kept = representative_layer(*[[rows[j] for rows in layers] for j in range(4)], HEADS)
    torch.testing.assert_close(model.encoder.attention[0].output.dense.weight, expected[3])
    assert report[0].retained_energy == pytest.approx(kept)
    weights = from_bert(bert, attention_type="standard", layer_sharing="attention", num_unique_layers=1,
                        fit_method="weights")
    mean = torch.stack([bert.encoder.layer[i].attention.output.dense.weight for i in range(4)]).mean(0)
    torch.testing.assert_close(weights.encoder.attention[0].output.dense.weight, mean)  # the weights fit: unchanged


def test_the_weights_fit_reports_what_averaging_the_layers_loses():
    """Averaging several layers' weights into one stored layer loses energy; the report used to say 1.0 for a
    standard conversion whatever the merge lost."""
    bert = tiny_bert(num_hidden_layers=4)
    _, report = from_bert(bert, attention_type="standard", layer_sharing="attention", num_unique_layers=1,
                          fit_method="weights", return_report=True)
    rows = [torch.stack([layer_rows(bert, i)[j].double() for i in range(4)]) for j in range(3)]
    lost = sum(float((stacked - stacked.mean(0)).pow(2).sum()) for stacked in rows)
    total = sum(float(stacked.pow(2).sum()) for stacked in rows)
    assert 0 < report[0].retained_energy < 0.9  # four random layers: their mean keeps little
    assert report[0].retained_energy == pytest.approx(1 - lost / total, rel=1e-5)  # standard's fit itself is exact
    with torch.no_grad():  # identical layers lose nothing
        for layer in bert.encoder.layer[1:]:
            layer.load_state_dict(bert.encoder.layer[0].state_dict())
    _, report = from_bert(bert, attention_type="standard", layer_sharing="attention", num_unique_layers=1,
                          fit_method="weights", return_report=True)
    assert report[0].retained_energy == pytest.approx(1.0, abs=1e-6)
