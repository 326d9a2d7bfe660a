"""The trainer: resuming from a kept state is exactly the uninterrupted run."""

import pytest


def test_resume_from_snapshot_is_bit_identical(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from didmem.lab import build_design, quick_config
    from didmem.lab.trainer import init_model, torch_session, train

    cfg = quick_config(n_steps=24, exact_cohorts=())
    design = build_design(cfg)
    tokens = design.tokens[design.order]
    vocab = len(design.corpus.tokenizer)
    import torch as _torch

    before = (_torch.get_num_threads(), _torch.are_deterministic_algorithms_enabled())
    with torch_session(cfg.threads) as torch:
        threads_inside = torch.get_num_threads()
        full = train(cfg, tokens, init_model(cfg, vocab, design.init_seed), tmp_path / "full",
                     cfg.checkpoints, snapshot_steps=[12])
        resumed = train(cfg, tokens, full["snapshots"][12], tmp_path / "resumed", [24])
    assert threads_inside == cfg.threads
    # the session restores the caller's torch settings
    assert (_torch.get_num_threads(), _torch.are_deterministic_algorithms_enabled()) == before
    a = (full["checkpoints"][24] / "model.safetensors").read_bytes()
    b = (resumed["checkpoints"][24] / "model.safetensors").read_bytes()
    assert a == b
    assert list(resumed["losses"]) == list(full["losses"][12:])
