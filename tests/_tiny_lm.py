"""A tiny MLP language model trained to convergence, and exact leave-one-out retraining.

Used by the influence-function tests; torch is imported by the test module that uses it.
"""

from __future__ import annotations

import numpy as np
import torch


class TinyLM(torch.nn.Module):
    """logits(x_t) = W tanh(E[x_t]) + b: a bigram MLP language model.

    No linear map follows the embedding before the non-linearity (nor a bias beside it), so
    the model has no continuous reparametrisation symmetry that would make the Hessian of
    the regularised objective singular.
    """

    def __init__(self, vocab: int = 10, hidden: int = 8, seed: int = 0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.embed = torch.nn.Parameter(
            torch.randn(vocab, hidden, generator=gen, dtype=torch.float64) * 0.5)
        self.out = torch.nn.Linear(hidden, vocab, dtype=torch.float64)

    def forward(self, ids):
        return self.out(torch.tanh(self.embed[ids]))


class TinyMLPLM(torch.nn.Module):
    """logits(x_t) = W2 tanh(W1 tanh(E[x_t]) + b1) + b2: a bigram language model with one
    hidden ``Linear`` (``fc``) besides the output embedding (``out``), for the EK-FAC path,
    which tracks the ``Linear`` modules other than the output embedding.
    """

    def __init__(self, vocab: int = 10, hidden: int = 8, seed: int = 0):
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.embed = torch.nn.Parameter(
            torch.randn(vocab, hidden, generator=gen, dtype=torch.float64) * 0.5)
        self.fc = torch.nn.Linear(hidden, hidden, dtype=torch.float64)
        self.out = torch.nn.Linear(hidden, vocab, dtype=torch.float64)

    def forward(self, ids):
        return self.out(torch.tanh(self.fc(torch.tanh(self.embed[ids]))))


def corpus(n: int = 32, length: int = 8, vocab: int = 10, seed: int = 0) -> np.ndarray:
    """Sequences from a random bigram chain, plus a few rare 'secret' transitions."""
    rng = np.random.default_rng(seed)
    trans = rng.dirichlet(np.full(vocab, 0.3), size=vocab)
    seqs = np.empty((n, length), dtype=np.int64)
    for i in range(n):
        s = [rng.integers(vocab)]
        for _ in range(length - 1):
            s.append(rng.choice(vocab, p=trans[s[-1]]))
        seqs[i] = s
    return seqs


def objective(model, seqs, n_total: int, weight_decay: float, skip: int | None = None):
    """(1/n_total) * sum of mean-token losses (leaving out ``skip``) + (wd/2) ||theta||^2."""
    keep = [i for i in range(len(seqs)) if i != skip]
    ids = torch.as_tensor(seqs[keep])
    logp = torch.log_softmax(model(ids)[:, :-1], dim=-1)
    per_seq = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1).mean(dim=1)
    reg = sum((p ** 2).sum() for p in model.parameters())
    return per_seq.sum() / n_total + 0.5 * weight_decay * reg


def train(model, seqs, weight_decay: float, skip: int | None = None, iters: int = 400):
    """Minimise the objective to convergence with L-BFGS (in place); returns the model."""
    opt = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=iters, tolerance_grad=1e-12,
                            tolerance_change=1e-15, history_size=50,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        val = objective(model, seqs, len(seqs), weight_decay, skip)
        val.backward()
        return val

    for _ in range(3):
        opt.step(closure)
    return model


def mean_token_loglik(model, seq) -> float:
    ids = torch.as_tensor(seq[None])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids)[:, :-1], dim=-1)
        return float(logp.gather(-1, ids[:, 1:, None]).mean())


def loo_effects(model, seqs, weight_decay: float, which) -> np.ndarray:
    """Exact tau(x) = Y_T(x) - Y_{-x,T}(x) by retraining without x from the optimum."""
    import copy

    out = []
    for i in which:
        twin = train(copy.deepcopy(model), seqs, weight_decay, skip=i)
        out.append(mean_token_loglik(model, seqs[i]) - mean_token_loglik(twin, seqs[i]))
    return np.array(out)
