"""tosa_verify.evaluate and ``tosa-verify eval``: figures checked against torch and the reference model.

Independent references: the float predictions come from the trained torch module itself, the TOSA
predictions from ``tosa_reference_model`` run one input at a time on the same graph.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch

import tosa_verify
from tosa_verify.cli import main as cli_main
from tosa_verify.errors import TosaError, TosaInputError
from tosa_verify.evaluate import EvalError, evaluate


@pytest.fixture(scope="module")
def digits():
    import lowering
    from lowering import zoo

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, example, calibration = zoo.digits_cnn()
        lm = lowering.lower(model, (example[0][:1],), calibration=calibration)
    _, _, x_test, y_test = zoo.digits_data()
    return model, lm, x_test.numpy(), y_test.numpy()


def _reference_scores(lm, x: np.ndarray) -> np.ndarray:
    import tosa_reference_model as trm

    q = lm.quantize_inputs(torch.from_numpy(x))[0]
    rows = []
    for row in q:
        out, status = trm.run(lm.tosa, [np.ascontiguousarray(row[None])])
        assert "VALID" in str(status)
        rows.append(lm.output_qparams[0].dequantize(np.asarray(out[0]).astype(np.int64)).reshape(-1))
    return np.stack(rows)


def test_evaluate_matches_torch_and_reference_model(digits):
    model, lm, x, y = digits
    x, y = x[:96], y[:96]
    rep = evaluate(lm, x, labels=y, batch_size=16, workers=1, layer_samples=3, progress=None)
    with torch.no_grad():
        float_scores = model(torch.from_numpy(x)).double().numpy()
    ref_scores = _reference_scores(lm, x)
    float_top1, tosa_top1 = float_scores.argmax(1), ref_scores.argmax(1)
    assert rep.n == 96 and rep.classes == 10
    assert rep.predictions["tosa"].tolist() == tosa_top1.tolist()
    assert rep.top1_agreement == pytest.approx(np.mean(float_top1 == tosa_top1))
    top5 = np.argsort(-ref_scores, axis=1, kind="stable")[:, :5]
    assert rep.top5_agreement == pytest.approx(np.mean([f in t for f, t in zip(float_top1, top5, strict=True)]))
    assert rep.accuracy["float"] == pytest.approx(np.mean(float_top1 == y))
    assert rep.accuracy["tosa"] == pytest.approx(np.mean(tosa_top1 == y))
    want_confusion = np.zeros((10, 10), int)
    for f, t in zip(float_top1, tosa_top1, strict=True):
        want_confusion[f, t] += 1
    assert rep.confusion.tolist() == want_confusion.tolist()
    # SQNR per input from its definition (float scores from torch, TOSA scores from the reference)
    err = ((float_scores - ref_scores) ** 2).sum(1)
    want_sqnr = 10 * np.log10((float_scores ** 2).sum(1) / err)
    np.testing.assert_allclose(rep.sqnr_db, want_sqnr, rtol=1e-4)
    assert rep.sqnr_median == pytest.approx(np.median(want_sqnr), rel=1e-4)
    assert rep.worst(3) == np.argsort(want_sqnr, kind="stable")[:3].tolist()
    assert rep.layer_samples == [0, 48, 95]
    assert {r.tensor for r in rep.layers} >= {"conv2d", "linear_1"}
    assert all(r.samples == 3 and r.min_db <= r.mean_db for r in rep.layers)


def test_process_shards_merge_identically(digits):
    _, lm, x, _ = digits
    one = evaluate(lm, x[:80], metrics=("top1", "sqnr"), batch_size=16, workers=1, progress=None)
    two = evaluate(lm, x[:80], metrics=("top1", "sqnr"), batch_size=16, workers=2, progress=None)
    assert one.sqnr_db.tobytes() == two.sqnr_db.tobytes()
    assert one.predictions["tosa"].tolist() == two.predictions["tosa"].tolist()


def test_bad_dataset_and_options(digits):
    _, lm, x, _ = digits
    with pytest.raises(TosaInputError, match="do not fill the graph input"):
        evaluate(lm, x[:4, :, :4, :4], workers=1, progress=None)
    with pytest.raises(EvalError, match="unknown metric"):
        evaluate(lm, x[:4], metrics=("top7",), progress=None)
    with pytest.raises(EvalError, match=r"3 labels for 4 inputs"):
        evaluate(lm, x[:4], labels=np.zeros(3), progress=None)
    assert issubclass(EvalError, TosaError)


def test_cli_needs_data_for_other_models(capsys):
    assert cli_main(["eval", "mlp"]) == 2
    assert "has no built-in data set" in capsys.readouterr().err


def test_cli_npz_dataset_and_gate(digits, tmp_path, capsys):
    """A user data set (.npz with labels), JSON output, and the agreement gate failing at 100 %+."""
    model, _, x, y = digits
    np.savez(tmp_path / "d.npz", x=x[:40], y=y[:40])
    out = tmp_path / "r.json"
    code = cli_main(["eval", "digits_cnn", "--data", str(tmp_path / "d.npz"), "--workers", "1",
                     "--layer-samples", "2", "--json", str(out), "--min-top1-agreement", "1.0"])
    data = json.loads(out.read_text())
    with torch.no_grad():
        float_top1 = model(torch.from_numpy(x[:40])).argmax(1).numpy()
    assert data["per_input"]["float"] == float_top1.tolist()
    assert data["accuracy"]["float"] == pytest.approx(np.mean(float_top1 == y[:40]))
    agreement = data["top1_agreement"]
    assert code == (0 if agreement >= 1.0 else 1)
    assert data["passed"] == (code == 0)


@pytest.mark.slow
def test_cli_digits_default(digits, tmp_path, capsys):
    """``tosa-verify eval`` with no arguments: the 450 held-out digits, exit 0, report with plots."""
    model, lm, x, y = digits
    report, js = tmp_path / "eval.html", tmp_path / "eval.json"
    code = cli_main(["eval", "--report", str(report), "--json", str(js), "--min-top1-agreement", "0.95"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "top-1 agreement TOSA vs float" in printed and "accuracy tosa" in printed
    data = json.loads(js.read_text())
    assert data["n"] == 450
    with torch.no_grad():
        float_top1 = model(torch.from_numpy(x)).argmax(1).numpy()
    tosa_top1 = _reference_scores(lm, x).argmax(1)
    assert data["accuracy"]["float"] == pytest.approx(np.mean(float_top1 == y))
    assert data["accuracy"]["tosa"] == pytest.approx(np.mean(tosa_top1 == y))
    assert data["top1_agreement"] == pytest.approx(np.mean(float_top1 == tosa_top1))
    html = report.read_text()
    assert html.count("<img") >= 3 and "Worst inputs" in html and "Output SQNR over the data set" in html


@pytest.mark.slow
def test_ray_executor_merges_identically(digits):
    import ray  # the ray extra (pip install 'tosa-verify[ray]')

    _, lm, x, _ = digits
    local = evaluate(lm, x[:64], metrics=("top1", "sqnr"), batch_size=16, workers=1, progress=None)
    try:
        remote = evaluate(lm, x[:64], metrics=("top1", "sqnr"), batch_size=16, workers=2,
                          executor="ray", progress=None)
    finally:
        ray.shutdown()
    assert remote.sqnr_db.tobytes() == local.sqnr_db.tobytes()
    assert remote.predictions["tosa"].tolist() == local.predictions["tosa"].tolist()


def test_exports():
    from tosa_verify.batch import run_batch

    assert tosa_verify.run_batch is run_batch and tosa_verify.evaluate is evaluate
