"""Influence-function memorisation (Koh & Liang 2017; the paper's Estimator 4).

torch is imported inside :meth:`InfluenceEstimator.fit` only, so importing didmem (and this
module) never loads it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import EstimationError, ParameterError, optional_import
from ..results import CellResult
from ._instances import cell_means
from .base import BaseEstimator, Instance, Integral, Interval, OneOf

__all__ = ["InfluenceEstimator", "INFLUENCE_ASSUMPTION"]

INFLUENCE_ASSUMPTION = (
    "The training objective is (locally) convex and the final parameters theta_T are its "
    "minimiser, so removing x moves them by about (1/N) H^-1 grad L(theta_T, x) "
    "(Koh & Liang 2017); it fails for models stopped far from convergence or trained in one "
    "pass, where the step in which x was seen matters."
)


def _as_tokens(torch, value, what: str):
    arr = np.asarray(value.detach().cpu() if hasattr(value, "detach") else value)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] < 2:
        raise ParameterError(f"{what} must be a 2-D array of token ids (sequences x positions, "
                             f"at least 2 positions); got shape {arr.shape}.")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ParameterError(f"{what} must hold integer token ids; got dtype {arr.dtype}.")
    return torch.as_tensor(arr, dtype=torch.long)


class InfluenceEstimator(BaseEstimator):
    r"""Self-influence of each instance on its own outcome, by an inverse-Hessian product.

    With the training objective :math:`R(\theta) = \frac1N \sum_{i=1}^N L(\theta, x_i) +
    \frac{\lambda}{2}\lVert\theta\rVert^2` minimised by :math:`\theta_T`, removing ``x``
    moves the parameters to

    .. math:: \theta_{-x} \approx \theta_T + \tfrac1N H^{-1} \nabla L(\theta_T, x),
              \qquad H = \nabla^2 R(\theta_T) + \delta I,

    and the memorisation estimate is :math:`\hat\tau_{\mathrm{infl}}(x) = Y_T(x) -
    Y_{-x, T}(x)` with :math:`Y = -L` the mean token log-likelihood. ``approximation=
    "linear"`` uses the first-order value :math:`\frac1N \nabla L^\top H^{-1} \nabla L`;
    ``"shifted"`` evaluates the outcome at :math:`\theta_{-x}`.

    Hessian-vector products are exact (forward-over-reverse with ``torch.func``); the linear
    system is solved by conjugate gradients (``solver="cg"``), LiSSA (``"lissa"``) or, for
    tiny models, a dense solve (``"direct"``). The estimate refers to the final checkpoint
    ``T`` only: on the (cohort, time) grid it fills the residual cells ``(g, T)``.

    **Assumption.** See ``INFLUENCE_ASSUMPTION``, also stored in the result.

    Parameters
    ----------
    damping : float
        :math:`\delta`, added to the Hessian's diagonal (needed where the Hessian is not
        positive definite).
    weight_decay : float
        :math:`\lambda` of the training objective (its L2 term is part of the Hessian).
    solver : {"cg", "lissa", "direct"}
    max_iter : int
        Iterations of CG or LiSSA.
    tol : float
        Relative residual at which CG stops.
    lissa_scale : float
        LiSSA's scale; must exceed the Hessian's largest eigenvalue.
    approximation : {"linear", "shifted"}
    include, exclude : tuple of str
        Substrings of parameter names to track (empty ``include``: all) and to leave out
        (for example ``("embed_out",)`` to exclude a GPT-NeoX output embedding); parameters
        not tracked are held fixed.
    batch_size : int
        Sequences per batch in the Hessian-vector products.
    hessian_sample : int, optional
        Estimate the Hessian on this many training sequences drawn at random (without
        replacement; ``N`` stays the full training size). Speeds up the products on larger
        runs at the price of a noisier Hessian.
    random_state : None, int or numpy.random.Generator
        Seed of ``hessian_sample``.
    alpha : float
        One minus the coverage of the cells' pointwise intervals (over instances).

    Notes
    -----
    Where the damped Hessian is not positive definite along a search direction, CG stops
    there; ``extra["solver"]`` records each solve's iterations and relative residual, so a
    failed solve is visible (raise ``damping``). An EK-FAC approximation for larger models (``kronfluence``) is not implemented yet.

    References
    ----------
    Koh, P. W. and Liang, P. (2017). Understanding black-box predictions via influence
    functions. ICML.
    Lesci, P. et al. (2024). Causal estimation of memorisation profiles. ACL 2024, App. B.2.
    """

    _parameters = {
        "damping": (0.0, Interval(0, None)),
        "weight_decay": (0.0, Interval(0, None)),
        "solver": ("cg", OneOf("cg", "lissa", "direct")),
        "max_iter": (100, Integral(1)),
        "tol": (1e-6, Interval(0, None, closed="neither")),
        "lissa_scale": (10.0, Interval(0, None, closed="neither")),
        "approximation": ("linear", OneOf("linear", "shifted")),
        "include": ((), Instance(tuple)),
        "exclude": ((), Instance(tuple)),
        "batch_size": (64, Integral(1)),
        "hessian_sample": (None, Instance(int, allow_none=True)),
        "random_state": (None, Instance(int, np.random.Generator, allow_none=True,
                                        description="None, an int or a numpy Generator")),
        "alpha": (0.05, Interval(0, 1, closed="neither")),
    }

    def __init__(self, *, damping=0.0, weight_decay=0.0, solver="cg", max_iter=100, tol=1e-6,
                 lissa_scale=10.0, approximation="linear", include=(), exclude=(),
                 batch_size=64, hessian_sample=None, random_state=None, alpha=0.05):
        super().__init__(damping=damping, weight_decay=weight_decay, solver=solver,
                         max_iter=max_iter, tol=tol, lissa_scale=lissa_scale,
                         approximation=approximation, include=include, exclude=exclude,
                         batch_size=batch_size, hessian_sample=hessian_sample,
                         random_state=random_state, alpha=alpha)

    def fit(self, model, train, instances=None, *, units=None, cohorts=None, time=np.nan,
            checkpoint=None):
        """Estimate the self-influence of ``instances`` in a model trained on ``train``.

        Parameters
        ----------
        model : torch.nn.Module, path-like or backend
            A causal language model whose ``forward(input_ids)`` returns logits (or an
            object with ``.logits``), a Hugging Face checkpoint directory (loaded with
            ``transformers``), or a :class:`~didmem.backends.TransformersBackend`, whose
            ``checkpoint`` (by default the last) is loaded.
        train : array-like of int, shape (N, L)
            The training sequences (the Hessian is that of their mean loss; ``N`` is the
            ``N`` of the formula).
        instances : array-like of int, shape (n, L), optional
            The training instances to estimate (default: all of ``train``).
        units, cohorts : array-like, optional
            Identifier and cohort of each instance (default ``0..n-1`` and NaN).
        time : float
            The checkpoint ``T`` of ``model``, for the grid (with a backend: by default the
            loaded checkpoint).
        checkpoint : optional
            With a backend, which of its checkpoints to load.

        Returns
        -------
        CellResult
            Residual cells ``(g, T)`` and per-instance estimates in ``units`` (unit, cohort,
            time, estimate, std_error (NaN), grad_norm); ``extra["solver"]`` has the
            iterations and final relative residual of each solve.
        """
        p = self._validated_params()
        torch = optional_import("torch", "lm")
        from torch.func import functional_call, grad, jvp

        if hasattr(model, "checkpoint_source") and hasattr(model, "checkpoints"):
            steps = tuple(model.checkpoints)
            step = max(steps) if checkpoint is None else checkpoint
            if step not in steps:
                raise ParameterError(f"checkpoint {step!r} is not one of the backend's "
                                     f"checkpoints {list(steps)}.")
            if np.isnan(float(time)):
                time = float(step)
            model = _load(model.checkpoint_source(step))
        elif isinstance(model, (str, Path)):
            model = _load(str(model))
        if not isinstance(model, torch.nn.Module):
            raise ParameterError(f"model must be a torch.nn.Module or a checkpoint directory; "
                                 f"got {type(model).__name__}.")
        model = _exact_attention(model).eval()
        train_t = _as_tokens(torch, train, "train")
        inst_t = train_t if instances is None else _as_tokens(torch, instances, "instances")
        n_inst = inst_t.shape[0]
        units = np.arange(n_inst) if units is None else np.asarray(units)
        cohorts = np.full(n_inst, np.nan) if cohorts is None else np.asarray(cohorts, float)
        if len(units) != n_inst or len(cohorts) != n_inst:
            raise ParameterError(f"units and cohorts need one entry per instance ({n_inst}).")

        names, tracked, frozen = [], {}, {}
        for name, prm in model.named_parameters():
            keep = (not p["include"] or any(s in name for s in p["include"])) and \
                not any(s in name for s in p["exclude"])
            (tracked if keep else frozen)[name] = prm.detach()
            if keep:
                names.append(name)
        if not tracked:
            raise ParameterError("include/exclude leave no parameter to track.")
        buffers = {k: v.detach() for k, v in model.named_buffers()}
        shapes = [tracked[k].shape for k in names]
        sizes = [tracked[k].numel() for k in names]
        dtype = tracked[names[0]].dtype

        def unflat(v):
            return {k: t.view(s) for k, t, s in zip(names, torch.split(v, sizes), shapes)}

        def flat(d):
            return torch.cat([d[k].reshape(-1) for k in names])

        def loss(params, batch):
            out = functional_call(model, ({**frozen, **params}, buffers), (batch,))
            logits = out.logits if hasattr(out, "logits") else out
            logp = torch.log_softmax(logits[:, :-1].to(torch.float64 if dtype == torch.float64
                                                       else torch.float32), dim=-1)
            ll = logp.gather(-1, batch[:, 1:, None]).squeeze(-1)
            return -ll.mean()

        theta = flat(tracked)
        n_train = train_t.shape[0]
        hess_t = train_t
        if p["hessian_sample"] is not None and p["hessian_sample"] < n_train:
            if p["hessian_sample"] < 1:
                raise ParameterError("hessian_sample must be a positive number of sequences.")
            rng = np.random.default_rng(p["random_state"])
            pick = np.sort(rng.choice(n_train, p["hessian_sample"], replace=False))
            hess_t = train_t[torch.as_tensor(pick)]
        n_hess = hess_t.shape[0]
        batches = torch.split(hess_t, p["batch_size"])
        lam, delta = p["weight_decay"], p["damping"]

        def hvp(v):
            vd = unflat(v)
            total = torch.zeros_like(v)
            for b in batches:
                with warnings.catch_warnings():  # torch's forward-AD set-up, not the user's
                    warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*",
                                            category=DeprecationWarning)
                    _, hv = jvp(lambda q, b=b: grad(loss)(q, b), (unflat(theta),), (vd,))
                total += flat(hv) * (b.shape[0] / n_hess)
            return total + (lam + delta) * v

        solve_info = []
        with torch.no_grad():
            if p["solver"] == "direct":
                eye = torch.eye(theta.numel(), dtype=theta.dtype)
                dense = torch.stack([hvp(e) for e in eye], dim=1)
                dense = (dense + dense.T) / 2
        estimates, gnorms = np.empty(n_inst), np.empty(n_inst)
        for i in range(n_inst):
            x = inst_t[i:i + 1]
            g = flat(grad(loss)(unflat(theta), x)).detach()
            with torch.no_grad():
                if p["solver"] == "direct":
                    h = torch.linalg.solve(dense, g)
                    solve_info.append((1, 0.0))
                elif p["solver"] == "cg":
                    h, info = _cg(hvp, g, p["max_iter"], p["tol"])
                    solve_info.append(info)
                else:
                    h, info = _lissa(hvp, g, p["max_iter"], p["lissa_scale"])
                    solve_info.append(info)
                if p["approximation"] == "linear":
                    estimates[i] = float(g @ h) / n_train
                else:
                    shifted = unflat(theta + h / n_train)
                    estimates[i] = float(loss(shifted, x) - loss(unflat(theta), x))
            gnorms[i] = float(g.norm())
        if not np.all(np.isfinite(estimates)):
            raise EstimationError("InfluenceEstimator produced non-finite estimates; raise "
                                  "damping or check the model.")
        t = float(time)
        unit_frame = pd.DataFrame({"unit": units, "cohort": cohorts, "time": t,
                                   "estimate": estimates, "std_error": np.nan,
                                   "grad_norm": gnorms})
        if np.isnan(cohorts).all():
            cells = cell_means(unit_frame.assign(cohort=0.0))
            cells["cohort"] = np.full(len(cells["time"]), np.nan)
        else:
            cells = cell_means(unit_frame)
        info = pd.DataFrame(solve_info, columns=["iterations", "relative_residual"])
        info.insert(0, "unit", units)
        return CellResult.from_cells(
            **cells, alpha=p["alpha"], estimator=type(self).__name__, params=p,
            outcome="mean_token_loglik", assumption=INFLUENCE_ASSUMPTION, units=unit_frame,
            extra={"solver": info, "n_train": n_train, "n_parameters": int(theta.numel())})


def _load(source: str):
    """A causal LM from a directory or ``name@revision`` (the backends' checkpoint sources)."""
    transformers = optional_import("transformers", "lm")
    kwargs = {}
    if not Path(source).exists() and "@" in source:
        source, kwargs["revision"] = source.rsplit("@", 1)
    return transformers.AutoModelForCausalLM.from_pretrained(source, **kwargs)


def _exact_attention(model):
    """A copy of a Hugging Face model that uses eager attention (fused attention kernels have
    no forward-mode derivative); other modules are returned as they are."""
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", "eager") == "eager":
        return model
    import copy

    model = copy.deepcopy(model)
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    else:  # pragma: no cover - older transformers
        model.config._attn_implementation = "eager"
    return model


def _cg(matvec, b, max_iter: int, tol: float):
    """Conjugate gradients for ``A h = b`` with a symmetric positive definite ``A``."""
    h = b.new_zeros(b.shape)
    r = b.clone()
    d = r.clone()
    rr = r @ r
    b_norm = float(b.norm()) or 1.0
    it = 0
    for it in range(1, max_iter + 1):
        ad = matvec(d)
        curv = d @ ad
        if curv <= 0:  # not positive definite along d: stop with what we have
            break
        step = rr / curv
        h = h + step * d
        r = r - step * ad
        rr_new = r @ r
        if float(rr_new.sqrt()) / b_norm < tol:
            rr = rr_new
            break
        d = r + (rr_new / rr) * d
        rr = rr_new
    return h, (it, float(rr.sqrt()) / b_norm)


def _lissa(matvec, b, max_iter: int, scale: float):
    """LiSSA (Agarwal et al. 2017): ``h <- b + h - A h / scale``; returns ``h / scale``."""
    h = b.clone()
    for _ in range(max_iter):
        h = b + h - matvec(h) / scale
    out = h / scale
    res = float((matvec(out) - b).norm()) / (float(b.norm()) or 1.0)
    return out, (max_iter, res)
