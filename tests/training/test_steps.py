"""The line search of a run's step (training/steps.py, training/engine/step.py): a shorter step
along the trained update is an adapter between the incumbent and the trained one, and the run
keeps the longest step whose invalid tool calls on the suite stay within the gates' tolerance."""

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.factories import rated, requested
from training import runs, steps
from training.engine.step import WEIGHTS_FILE, adapter_at_step

A, B = "base_model.model.layers.0.q_proj.lora_A.weight", "base_model.model.layers.0.q_proj.lora_B.weight"


def adapter(folder, *, a: torch.Tensor, b: torch.Tensor):
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "demo-base", "r": 2}))
    save_file({A: a, B: b}, folder / WEIGHTS_FILE)
    return folder


def weights(folder) -> dict[str, torch.Tensor]:
    return load_file(folder / WEIGHTS_FILE)


def test_a_step_from_a_fresh_adapter_is_that_share_of_its_weight_change(tmp_path):
    torch.manual_seed(0)
    trained = adapter(tmp_path / "trained", a=torch.randn(2, 6), b=torch.randn(6, 2))
    half = weights(adapter_at_step(incumbent_adapter_dir=None, trained_adapter_dir=trained, fraction=0.5, out_dir=tmp_path / "half"))
    full = weights(trained)
    assert torch.allclose(half[B] @ half[A], 0.5 * (full[B] @ full[A]))
    assert json.loads((tmp_path / "half" / "adapter_config.json").read_text())["r"] == 2  # the rest of the adapter as trained


def test_a_step_from_an_incumbent_lies_between_it_and_the_trained_adapter(tmp_path):
    torch.manual_seed(0)
    incumbent = adapter(tmp_path / "incumbent", a=torch.randn(2, 6), b=torch.randn(6, 2))
    trained = adapter(tmp_path / "trained", a=torch.randn(2, 6), b=torch.randn(6, 2))
    quarter = weights(adapter_at_step(incumbent_adapter_dir=incumbent, trained_adapter_dir=trained, fraction=0.25, out_dir=tmp_path / "q"))
    for name in (A, B):
        assert torch.allclose(quarter[name], weights(incumbent)[name] + 0.25 * (weights(trained)[name] - weights(incumbent)[name]))
    with pytest.raises(ValueError):
        adapter_at_step(incumbent_adapter_dir=incumbent, trained_adapter_dir=trained, fraction=0, out_dir=tmp_path / "none")


SUITE_SIZE = 160


@pytest.fixture
def planted_rates(monkeypatch):
    """The suite's invalid-call rate of each adapter over 160 prompts, planted: by the step it was
    made at (the trained adapter: 1.0; the incumbent or the base: "reference")."""
    rates = {}

    def calls(suite, *, base_model_dir, adapter_dir, seed, device):
        if adapter_dir is None or adapter_dir.name == "incumbent":
            return round(rates["reference"] * SUITE_SIZE), SUITE_SIZE
        step = adapter_dir / "step.json"
        return round(rates[json.loads(step.read_text())["fraction"] if step.exists() else 1.0] * SUITE_SIZE), SUITE_SIZE

    monkeypatch.setattr(steps, "suite_invalid_calls", calls)
    return rates


def choose(tmp_path, **kwargs):
    trained = tmp_path / "trained"
    if not trained.exists():
        adapter(trained, a=torch.ones(2, 6), b=torch.ones(6, 2))
    return steps.step_choose(suite=None, base_model_dir=tmp_path, incumbent_adapter_dir=None, trained_adapter_dir=trained,
                             work_dir=tmp_path, tolerance=0.02, seed=0, **kwargs)


def test_the_whole_step_is_kept_when_one_pass_does_not_show_it_beyond_the_tolerance(tmp_path, planted_rates):
    planted_rates.update({"reference": 0.01, 1.0: 0.05})  # 4 points more: within the noise of 160 samples
    choice = choose(tmp_path)
    assert choice.fraction == 1.0 and choice.adapter_dir == tmp_path / "trained" and len(choice.trials) == 1
    assert choice.trials[0] == {"fraction": 1.0, "invalid_tool_call_rate": 0.05, "shown_beyond": False}


def test_an_overshooting_step_is_shortened_to_the_longest_not_shown_beyond(tmp_path, planted_rates):
    planted_rates.update({"reference": 0.01, 1.0: 0.4, 0.5: 0.15, 0.25: 0.03})
    choice = choose(tmp_path)
    assert choice.fraction == 0.25 and json.loads((choice.adapter_dir / "step.json").read_text()) == {"fraction": 0.25}
    assert [t["fraction"] for t in choice.trials] == [1.0, 0.5, 0.25] and choice.reference == 0.0125
    assert [t["shown_beyond"] for t in choice.trials] == [True, True, False]


def test_when_every_step_is_shown_beyond_the_one_with_fewest_invalid_calls_goes_to_the_gates(tmp_path, planted_rates):
    planted_rates.update({"reference": 0.0, 1.0: 0.3, 0.5: 0.15, 0.25: 0.2})
    assert choose(tmp_path).fraction == 0.5


def test_a_run_with_the_step_search_samples_the_suite_and_reports_the_step_it_kept(acme, training, sent, settings):
    settings.TRAINING_STEP_SEARCH = True
    settings.GATES_GLOBAL_SUITE = "tests.serving.suites.TinySuite"
    rated(acme.org, ("edit_persisted",), ("edit_rejected", "dissatisfied_followup"))
    done = runs.run_execute(str(requested(acme.org).pk))
    step = done.report["step"]
    # The tiny model writes invalid calls nearly always, trained or not: no shorter step does better.
    assert step["fraction"] == 1.0 and step["reference_invalid_tool_call_rate"] >= 0.9
    assert step["trials"][0]["fraction"] == 1.0 and not (runs.run_work_dir(done)).exists()
    assert done.status == runs.Status.SUCCEEDED and set(done.report["seconds"]) == {"setup", "train", "save"}
