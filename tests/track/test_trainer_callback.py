"""The Trainer callback: a tracked run equals post-hoc scoring of its saved checkpoints, and a
resumed run equals an uninterrupted one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from didmem.errors import ParameterError

from .track_helpers import (RecordingCollator, TokenDataset, cohorts_from_batches, sequences,
                            tiny_model, training_args)

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

N_TRAIN, N_VALID = 50, 10
METRICS = ("sequence_loglik", "mean_token_loglik", "token_accuracy", "mean_token_rank")


def _instances():
    train, valid = sequences(N_TRAIN, seed=1), sequences(N_VALID, seed=2)
    tokens = np.concatenate([train, valid])
    units = np.arange(1000, 1000 + N_TRAIN + N_VALID)
    sample_ids = np.concatenate([np.arange(N_TRAIN), np.full(N_VALID, -1)])
    return train, tokens, units, sample_ids


def _tracker(folder):
    from didmem.track import MemorisationTracker

    _, tokens, units, sample_ids = _instances()
    return MemorisationTracker(folder, tokens, unit_ids=units, sample_ids=sample_ids,
                               metrics=METRICS, batch_size=8)


def _run(out, folder, *, resume=None, fail_at=None, collator=None, model=None):
    """One Trainer run with the callback; ``fail_at`` raises at that step's start (a kill)."""
    from didmem.track import MemorisationCallback

    train, *_ = _instances()
    model = model if model is not None else tiny_model(seed=3)
    tracker = _tracker(folder)
    trainer = transformers.Trainer(model=model, args=training_args(out),
                                   train_dataset=TokenDataset(train),
                                   data_collator=collator or RecordingCollator())
    callback = MemorisationCallback(tracker, log_options={"n_bootstrap": 0}).attach(trainer)
    if fail_at is not None:
        trainer.add_callback(_Kill(fail_at))
    trainer.train(resume_from_checkpoint=resume)
    return tracker, trainer, callback


class _Kill(transformers.TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_begin(self, args, state, control, **kw):
        if state.global_step + 1 == self.step:
            raise KeyboardInterrupt(f"killed before step {self.step}")


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """An uninterrupted tracked run, with the initial model saved as checkpoint 0."""
    root = tmp_path_factory.mktemp("tracked")
    model = tiny_model(seed=3)
    model.save_pretrained(root / "step0")
    collator = RecordingCollator()
    tracker, trainer, callback = _run(root / "out", root / "track", collator=collator,
                                      model=model)
    return root, tracker, collator, trainer, callback


def test_tracked_panel_equals_post_hoc_scoring(tracked):
    from didmem.backends import TransformersBackend

    root, tracker, collator, _, _ = tracked
    assert tracker.evaluations == [0, 2, 4, 6]
    # the Trainer's own order (recorded by the collator): 12 full batches of 4, 2 dropped
    assert len(collator.batches) == 12 and all(len(b) == 4 for b in collator.batches)
    cohorts = cohorts_from_batches(collator.batches, 2, tracker.evaluations)
    assert len(cohorts) == 48
    _, tokens, units, sample_ids = _instances()
    checkpoints = {0: root / "step0", **{s: root / "out" / f"checkpoint-{s}" for s in (2, 4, 6)}}
    backend = TransformersBackend(checkpoints, device="cpu", batch_size=8, dtype="float32")
    post = backend.score(tokens, unit_ids=units, metrics=METRICS)
    cohort = {u: (cohorts.get(int(s), np.nan) if s >= 0 else np.inf)
              for u, s in zip(units, sample_ids)}
    post["cohort"] = post["unit"].map(cohort)
    post = post[post["cohort"].notna()].sort_values(["time", "unit"]).reset_index(drop=True)
    mine = tracker.panel_frame()
    assert tracker.n_pending == 2  # the two examples that dataloader_drop_last drops
    assert list(mine.columns) == ["unit", "time", "cohort", *METRICS]
    np.testing.assert_array_equal(mine["unit"], post["unit"])
    np.testing.assert_array_equal(mine["time"], post["time"])
    np.testing.assert_array_equal(mine["cohort"], post["cohort"])
    for m in METRICS:
        np.testing.assert_allclose(mine[m], post[m], rtol=1e-6, atol=1e-6, err_msg=m)


def test_profile_equals_didmem_estimate_on_the_folder(tracked, tmp_path):
    from didmem import load_result
    from didmem.cli import main

    _, tracker, *_ = tracked
    ours = tracker.profile("mean_token_loglik", seed=0).to_frame()
    out = tmp_path / "res.parquet"
    assert main(["estimate", str(tracker.folder.path), "--outcome", "mean_token_loglik",
                 "--out", str(out), "--seed", "0"]) == 0
    theirs = load_result(out).to_frame()
    assert len(ours) == len(theirs) > 0
    for column in ("cohort", "time", "estimate", "std_error", "ci_lower", "ci_upper"):
        np.testing.assert_allclose(ours[column], theirs[column], rtol=1e-9, atol=1e-9,
                                   err_msg=column)


def test_callback_logs_the_last_cohorts_instantaneous_memorisation(tracked):
    _, tracker, _, trainer, callback = tracked
    logged = [h for h in trainer.state.log_history
              if "memorisation/mean_token_loglik/instantaneous" in h]
    assert [h["step"] for h in logged] == [2, 4, 6]
    cells = tracker.profile("mean_token_loglik", n_bootstrap=0, seed=0).to_frame()
    last = cells[(cells["cohort"] == 6) & (cells["time"] == 6)].iloc[0]
    assert logged[-1]["memorisation/mean_token_loglik/instantaneous"] == pytest.approx(
        last["estimate"], rel=1e-12)
    assert logged[-1]["memorisation/mean_token_loglik/ci_lower"] < last["estimate"] < \
        logged[-1]["memorisation/mean_token_loglik/ci_upper"]


@pytest.mark.parametrize("state_saved", [True, False], ids=["state-saved", "killed-in-save"])
def test_resumed_run_equals_uninterrupted_run(tracked, tmp_path, state_saved):
    _, uninterrupted, *_ = tracked
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "out", tmp_path / "track", fail_at=6)
    assert (tmp_path / "track" / "part-t4.parquet").exists()
    if not state_saved:
        # killed after the Trainer wrote checkpoint-4, before the callback's on_save: the
        # tracker folder's state (its evaluation at step 4) continues the panel
        (tmp_path / "out" / "checkpoint-4" / "didmem_tracker.json").unlink()
    checkpoint = tmp_path / "out" / "checkpoint-4"
    # the model read from the checkpoint: transformers 5's Trainer reloads a GPT-NeoX
    # checkpoint into a fresh model without its output head ('embed_out' saved, 'lm_head'
    # expected), which is no concern of the tracker
    model = transformers.GPTNeoXForCausalLM.from_pretrained(checkpoint)
    tracker, *_ = _run(tmp_path / "out", tmp_path / "track", resume=str(checkpoint),
                       model=model)
    assert tracker.evaluations == [0, 2, 4, 6]
    a, b = uninterrupted.panel_frame(), tracker.panel_frame()
    pd.testing.assert_frame_equal(a[["unit", "time", "cohort"]], b[["unit", "time", "cohort"]])
    for m in METRICS:
        np.testing.assert_allclose(a[m], b[m], rtol=1e-6, atol=1e-6, err_msg=m)


def test_a_scored_step_is_not_scored_again(tracked):
    _, tracker, _, trainer, callback = tracked
    parts = sorted(p.name for p in tracker.folder.path.glob("part-*"))
    control = transformers.TrainerControl(should_save=True, should_evaluate=True)
    callback.on_epoch_end(trainer.args, trainer.state, control, model=trainer.model)
    assert tracker.evaluations == [0, 2, 4, 6]
    assert sorted(p.name for p in tracker.folder.path.glob("part-*")) == parts


def _trainer_with(tmp_path, sample_ids):
    from didmem.track import MemorisationCallback, MemorisationTracker

    train, tokens, units, _ = _instances()
    tracker = MemorisationTracker(tmp_path / "track", tokens, unit_ids=units,
                                  sample_ids=sample_ids, metrics=METRICS)
    trainer = transformers.Trainer(model=tiny_model(), args=training_args(tmp_path / "out"),
                                   train_dataset=TokenDataset(train),
                                   data_collator=RecordingCollator())
    MemorisationCallback(tracker).attach(trainer)
    return trainer, tracker


def test_sample_ids_that_do_not_map_to_the_training_set_are_refused(tmp_path):
    from didmem.errors import InstanceError

    _, _, _, sample_ids = _instances()
    swapped = sample_ids.copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    trainer, tracker = _trainer_with(tmp_path / "a", swapped)
    with pytest.raises(InstanceError, match="unit 1000 has sample index 1, but the training "
                                            "set's example 1 has other input_ids"):
        trainer.train()
    assert tracker.evaluations == [] and trainer.state.global_step == 0
    outside = sample_ids.copy()
    outside[3] = N_TRAIN + 5
    trainer, _ = _trainer_with(tmp_path / "b", outside)
    with pytest.raises(InstanceError, match="1 tracked instances have sample indices outside "
                                            "the Trainer's training set of 50 examples, e.g. "
                                            "unit 1003 with index 55"):
        trainer.train()


def test_resume_without_the_trackers_state_is_refused(tracked, tmp_path):
    import shutil

    root, *_ = tracked
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)
    shutil.copytree(root / "track", tmp_path / "track")
    (out / "checkpoint-2" / "didmem_tracker.json").unlink()
    model = transformers.GPTNeoXForCausalLM.from_pretrained(out / "checkpoint-2")
    with pytest.raises(ParameterError, match="Resuming at step 2, but neither the checkpoint"):
        _run(out, tmp_path / "track", resume=str(out / "checkpoint-2"), model=model)


def test_an_epochs_short_last_step_without_drop_last(tmp_path):
    """13 micro-batches (the last of 2 examples) and gradient accumulation 2: the last step
    trains one micro-batch, and the callback reads the same order as the collator."""
    from didmem.track import MemorisationCallback

    train, *_ = _instances()
    tracker = _tracker(tmp_path / "track")
    collator = RecordingCollator()
    trainer = transformers.Trainer(
        model=tiny_model(seed=3), args=training_args(tmp_path / "out", dataloader_drop_last=False),
        train_dataset=TokenDataset(train), data_collator=collator)
    MemorisationCallback(tracker, log_outcome=False).attach(trainer)
    trainer.train()
    assert len(collator.batches) == 13 and len(collator.batches[-1]) == 2
    assert trainer.state.global_step == 7 and tracker.evaluations[-1] == 7
    expected = np.full(len(tracker.sample_ids), -1)
    for j, batch in enumerate(collator.batches):
        expected[batch] = j // 2 + 1  # sample index i is row i of the tracker
    np.testing.assert_array_equal(tracker.first_step, expected)
    assert tracker.n_pending == 0
