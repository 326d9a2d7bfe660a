"""MemorisationTracker in a plain loop: cohorts from the observed order, the folder's layout,
and clear errors for bad input and faults (a kill during an evaluation)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from didmem.errors import InstanceError, OutputFileError, ParameterError

from .track_helpers import MAX_POSITIONS, sequences, tiny_model

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

METRICS = ("mean_token_loglik", "token_accuracy")


def _tracker(folder, n=6, **options):
    from didmem.track import MemorisationTracker

    tokens = sequences(n, seed=4)
    sample_ids = np.arange(n)
    sample_ids[-1] = -1  # a validation instance
    return MemorisationTracker(folder, tokens, unit_ids=[f"u{i}" for i in range(n)],
                               sample_ids=sample_ids, metrics=METRICS, batch_size=4, **options)


def _nudge(model, scale=1e-2):
    """A deterministic 'training step' that changes the scores."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.sin(torch.arange(p.numel(), dtype=p.dtype)).reshape(p.shape))


def test_cohorts_are_the_first_evaluation_after_the_batch(tmp_path):
    model = tiny_model()
    tracker = _tracker(tmp_path)
    tracker.score(model, 0)
    tracker.observe(1, [0, 7, 8])          # unit u0 (7, 8: untracked examples)
    _nudge(model)
    tracker.observe(2, [1])
    tracker.score(model, 2)                # macro-batch of steps 1-2: cohort 2
    tracker.observe(3, [2, 3])
    _nudge(model)
    tracker.score(model, 5)
    tracker.observe(6, [4])                # after the last evaluation: not in the panel
    assert tracker.n_pending == 1
    panel = tracker.panel_frame()
    cohort = panel.groupby("unit")["cohort"].first().to_dict()
    assert cohort == {"u0": 2, "u1": 2, "u2": 5, "u3": 5, "u5": np.inf}
    # balanced: every unit of the panel at every evaluation
    assert panel.groupby("unit")["time"].apply(list).map(tuple).unique().tolist() == [(0, 2, 5)]
    # the held-back rows of u2, u3 entered with the part of their cohort, unchanged
    part5 = pd.read_parquet(tmp_path / "part-t5.parquet")
    assert sorted(part5[part5["time"] < 5]["unit"]) == ["u2", "u2", "u3", "u3"]
    held = pd.read_parquet(tmp_path / "_held" / "t0.parquet").set_index("unit")
    row = panel[(panel["unit"] == "u2") & (panel["time"] == 0)].iloc[0]
    assert row["mean_token_loglik"] == held.loc["u2", "mean_token_loglik"]
    # the profile reads the same folder as `didmem estimate` (two units a cohort: warned)
    from didmem.errors import SmallCohortWarning

    with pytest.warns(SmallCohortWarning):
        cells = tracker.profile("mean_token_loglik", n_bootstrap=0,
                                control_group="not_yet_treated").to_frame()
    assert set(cells["cohort"]) == {2, 5}


def test_scores_are_the_backends_for_the_same_weights(tmp_path):
    from didmem.backends import TransformersBackend

    model = tiny_model()
    model.save_pretrained(tmp_path / "ckpt")
    tracker = _tracker(tmp_path / "track")
    mine = tracker.score(model, 0)
    backend = TransformersBackend({0: tmp_path / "ckpt"}, device="cpu", batch_size=4,
                                  dtype="float32")
    theirs = backend.score(tracker.instances.token_ids, unit_ids=tracker.instances.units,
                           metrics=METRICS)
    for m in METRICS:
        np.testing.assert_allclose(mine[m], theirs[m], rtol=1e-6, atol=1e-6)


def test_eval_mode_no_gradient_and_training_modes_restored(tmp_path):
    model = tiny_model()
    model.train()
    frozen = model.gpt_neox.layers[0]
    frozen.eval()                          # a submodule the user keeps in eval mode
    before = [(name, m.training) for name, m in model.named_modules()]
    seen = []
    model.gpt_neox.register_forward_hook(lambda mod, i, o: seen.append(mod.training))
    _tracker(tmp_path).score(model, 0)
    assert seen and not any(seen)          # scored in eval mode
    assert [(name, m.training) for name, m in model.named_modules()] == before
    assert all(p.grad is None for p in model.parameters())


def test_instance_longer_than_the_context_is_refused(tmp_path):
    from didmem.track import MemorisationTracker

    tokens = [np.arange(1, 11), np.arange(1, MAX_POSITIONS + 3) % 90 + 1]
    tracker = MemorisationTracker(tmp_path, tokens, unit_ids=["short", "long"],
                                  metrics=METRICS, sample_ids=[0, 1])
    with pytest.raises(InstanceError, match=r"longer than the tracked model can score: it has 48 positions.*"
                                            r"units 'long' have lengths 50"):
        tracker.score(tiny_model(), 0)
    assert not list(tmp_path.glob("part-*")) and tracker.evaluations == []


def test_bad_sampler_indices_are_refused(tmp_path):
    tracker = _tracker(tmp_path)
    with pytest.raises(InstanceError, match="negative indices at step 1"):
        tracker.observe(1, [3, -1])
    with pytest.raises(InstanceError, match="1-D sequence of integers"):
        tracker.observe(1, [0.5, 1.0])
    tracker.observe(2, [0])
    with pytest.raises(ParameterError, match="steps must come in order; got step 1 after step 2"):
        tracker.observe(1, [1])


def test_sample_ids_are_checked(tmp_path):
    from didmem.track import MemorisationTracker

    with pytest.raises(ParameterError, match=r"indices 3 are given to more than one"):
        MemorisationTracker(tmp_path, sequences(2, 1), sample_ids=[3, 3])
    with pytest.raises(ParameterError, match="needs 'sample_ids'"):
        MemorisationTracker(tmp_path, sequences(2, 1), unit_ids=["a", "b"])
    with pytest.raises(ParameterError, match="'metrics' parameter of MemorisationTracker"):
        MemorisationTracker(tmp_path, sequences(2, 1), metrics=["reference_ratio"])


def test_an_evaluation_is_never_repeated(tmp_path):
    model = tiny_model()
    tracker = _tracker(tmp_path)
    tracker.score(model, 0)
    tracker.observe(1, [0])
    tracker.score(model, 2)
    with pytest.raises(ParameterError, match=r"step 2 is not after the last evaluation \(step 2"):
        tracker.score(model, 2)
    with pytest.raises(ParameterError, match="step 2 is at or before the last evaluation"):
        tracker.observe(2, [1])
    assert sorted(p.name for p in tmp_path.glob("part-*")) == ["part-t0.parquet",
                                                               "part-t2.parquet"]


def test_kill_while_writing_leaves_no_half_written_part(tmp_path, monkeypatch):
    model = tiny_model()
    tracker = _tracker(tmp_path)
    tracker.score(model, 0)
    tracker.observe(1, [0, 1])

    def killed(self, *args, **kwargs):
        raise KeyboardInterrupt("killed while writing")

    with monkeypatch.context() as patch:
        patch.setattr(pd.DataFrame, "to_parquet", killed)
        with pytest.raises(KeyboardInterrupt):
            tracker.score(model, 2)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [
        "_tracker.json", "part-t0.parquet", "t0.parquet"]


def test_kill_between_part_and_state_resumes_the_same_panel(tmp_path, monkeypatch):
    from didmem.track._store import TrackerFolder

    def run(folder, kill=False):
        model = tiny_model()
        tracker = _tracker(folder)
        tracker.score(model, 0)
        tracker.observe(1, [0, 1])
        _nudge(model)
        if kill:
            with monkeypatch.context() as patch:
                patch.setattr(TrackerFolder, "write_state",
                              lambda self, state: (_ for _ in ()).throw(KeyboardInterrupt()))
                with pytest.raises(KeyboardInterrupt):
                    tracker.score(model, 2)
            assert (folder / "part-t2.parquet").exists()   # written, but not in the state
            tracker = _tracker(folder)                      # reopened: the stale part goes
            assert tracker.evaluations == [0] and not (folder / "part-t2.parquet").exists()
            tracker.observe(1, [0, 1])                      # the loop replays from its state
        tracker.score(model, 2)
        return tracker.panel_frame()

    pd.testing.assert_frame_equal(run(tmp_path / "killed", kill=True), run(tmp_path / "whole"))


def test_folder_of_another_run_is_refused(tmp_path):
    from didmem.track import MemorisationTracker

    _tracker(tmp_path).score(tiny_model(), 0)
    with pytest.raises(ParameterError, match="written for other instances"):
        MemorisationTracker(tmp_path, sequences(6, 9), unit_ids=[f"u{i}" for i in range(6)],
                            sample_ids=np.arange(6), metrics=METRICS, batch_size=4)
    (tmp_path / "_tracker.json").unlink()
    with pytest.raises(ParameterError, match="holds panel parts but no tracker state"):
        _tracker(tmp_path)
    (tmp_path / "_tracker.json").write_text("{not json")
    with pytest.raises(OutputFileError, match="cannot be read"):
        _tracker(tmp_path)


def test_profile_needs_an_evaluation_and_a_known_outcome(tmp_path):
    tracker = _tracker(tmp_path)
    with pytest.raises(ParameterError, match="no evaluation yet"):
        tracker.profile("mean_token_loglik")
    with pytest.raises(ParameterError, match="name the outcome"):
        tracker.profile()
    with pytest.raises(ParameterError, match="Unknown outcome 'entropy'"):
        tracker.profile("entropy")
