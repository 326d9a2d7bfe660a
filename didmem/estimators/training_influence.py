"""Influence-function memorisation (Koh & Liang 2017; the paper's Estimator 4).

torch is imported inside :meth:`InfluenceEstimator.fit` only, so importing didmem (and this
module) never loads it.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import EstimationError, ParameterError, optional_import
from ..results import CellResult
from ._per_instance import cell_means
from .base import Alpha, BaseEstimator, Instance, Integral, Interval, OneOf, Seed
from .inputs import TrainedModel

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
    tiny models, a dense solve (``"direct"``). For larger models, ``solver="ekfac"`` replaces
    :math:`H` by the EK-FAC approximation of its Gauss-Newton part (George et al. 2018;
    Grosse et al. 2023) computed by ``kronfluence`` (``pip install 'didmem[ekfac]'``); it
    tracks the ``torch.nn.Linear`` modules other than the output embedding (the module
    ``get_output_embeddings()`` returns, else the last ``Linear``), holds every other
    parameter fixed, and supports ``approximation="linear"`` only. The estimate refers to the final checkpoint
    ``T`` only: on the (cohort, time) grid it fills the residual cells ``(g, T)``.

    **Assumption.** See ``INFLUENCE_ASSUMPTION``, also stored in the result.

    Parameters
    ----------
    damping : float
        :math:`\delta`, added to the Hessian's diagonal (needed where the Hessian is not
        positive definite).
    weight_decay : float
        :math:`\lambda` of the training objective (its L2 term is part of the Hessian).
    solver : {"cg", "lissa", "direct", "ekfac"}
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
        not tracked are held fixed. With ``solver="ekfac"`` they filter module names.
    batch_size : int
        Sequences per batch in the Hessian-vector products.
    hessian_sample : int, optional
        Estimate the Hessian on this many training sequences drawn at random (without
        replacement; ``N`` stays the full training size). Speeds up the products on larger
        runs at the price of a noisier Hessian.
    seed : None, non-negative int or numpy.random.Generator
        Seed of ``hessian_sample`` and of the labels EK-FAC draws for its Fisher.
    alpha : float
        One minus the coverage of the cells' pointwise intervals (over instances).

    Notes
    -----
    Where the damped Hessian is not positive definite along a search direction, CG stops
    there; ``extra["solver"]`` records each solve's iterations and relative residual, so a
    failed solve is visible (raise ``damping``); EK-FAC has no iterations (NaN there) and
    records ``extra["tracked_modules"]``.

    On the tiny language model of the tests (one hidden ``Linear`` tracked, 72 of 242
    parameters) the EK-FAC estimates correlate 0.67 with exact leave-one-out retraining
    (the exact linear estimate over all parameters: 0.99; over the same 72: 0.84): EK-FAC
    inherits the error of tracking a subset and adds that of the Gauss-Newton and
    Kronecker approximations (0.93 with the exact estimate over the same module). See
    ``benchmarks/RESULTS.md``.

    References
    ----------
    George, T. et al. (2018). Fast approximate natural gradient descent in a
    Kronecker-factored eigenbasis. NeurIPS.
    Grosse, R. et al. (2023). Studying large language model generalization with influence
    functions. arXiv:2308.03296.
    Koh, P. W. and Liang, P. (2017). Understanding black-box predictions via influence
    functions. ICML.
    Lesci, P. et al. (2024). Causal estimation of memorisation profiles. ACL 2024, App. B.2.
    """

    _constraints = {
        "damping": Interval(0, None),
        "weight_decay": Interval(0, None),
        "solver": OneOf("cg", "lissa", "direct", "ekfac"),
        "max_iter": Integral(1),
        "tol": Interval(0, None, closed="neither"),
        "lissa_scale": Interval(0, None, closed="neither"),
        "approximation": OneOf("linear", "shifted"),
        "include": Instance(tuple),
        "exclude": Instance(tuple),
        "batch_size": Integral(1),
        "hessian_sample": Instance(int, allow_none=True),
        "seed": Seed(),
        "alpha": Alpha(),
    }

    def __init__(self, *, damping=0.0, weight_decay=0.0, solver="cg", max_iter=100, tol=1e-6,
                 lissa_scale=10.0, approximation="linear", include=(), exclude=(),
                 batch_size=64, hessian_sample=None, seed=None, alpha=0.05):
        super().__init__(damping=damping, weight_decay=weight_decay, solver=solver,
                         max_iter=max_iter, tol=tol, lissa_scale=lissa_scale,
                         approximation=approximation, include=include, exclude=exclude,
                         batch_size=batch_size, hessian_sample=hessian_sample,
                         seed=seed, alpha=alpha)

    input_type = TrainedModel
    _input_hint = "Build one with didmem.TrainedModel(model, train[, instances, ...])."

    def fit(self, data: TrainedModel):
        """Estimate the self-influence of the instances in a model trained on ``train``.

        Parameters
        ----------
        data : TrainedModel
            The model (a module, a checkpoint directory or a backend), its training
            sequences, and the instances to estimate with their units, cohorts and
            checkpoint.

        Returns
        -------
        CellResult
            Residual cells ``(g, T)`` and per-instance estimates in ``units`` (unit, cohort,
            time, estimate, std_error (NaN), grad_norm); ``extra["solver"]`` has the
            iterations and final relative residual of each solve.
        """
        return super().fit(data)

    def _fit(self, data: TrainedModel, p):
        torch = optional_import("torch", "lm")
        model, time = _resolve_model(torch, data.model, data.checkpoint, data.time)
        train_t, inst_t, units, cohorts = _instances(torch, data)
        name = type(self).__name__
        if p["solver"] == "ekfac":
            if p["approximation"] != "linear":
                raise ParameterError('solver="ekfac" supports approximation="linear" only.')
            estimates, gnorms, solve_info, n_tracked, modules = _ekfac(
                torch, model, train_t, inst_t, p)
            return _result(p, name, estimates, gnorms, solve_info, units, cohorts, time,
                           train_t.shape[0], n_tracked, modules=modules)
        problem = _TrackedLoss(torch, model, train_t, p)
        estimates, gnorms, solve_info = _self_influences(torch, problem, inst_t, p)
        return _result(p, name, estimates, gnorms, solve_info, units, cohorts, time,
                       problem.n_train, int(problem.theta.numel()))


def _resolve_model(torch, model, checkpoint, time):
    """The torch module to differentiate (a backend's checkpoint, a directory or the module
    itself; attention switched to its exact path, in eval mode) and the instances' time
    (the checkpoint's step where none is given)."""
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
    return _exact_attention(model).eval(), time


def _instances(torch, data: TrainedModel):
    """The training and instance token tensors, and each instance's unit and cohort."""
    train_t = _as_tokens(torch, data.train, "train")
    inst_t = train_t if data.instances is None else _as_tokens(torch, data.instances,
                                                                  "instances")
    n_inst = inst_t.shape[0]
    units = np.arange(n_inst) if data.units is None else np.asarray(data.units)
    cohorts = (np.full(n_inst, np.nan) if data.cohorts is None
               else np.asarray(data.cohorts, float))
    if len(units) != n_inst or len(cohorts) != n_inst:
        raise ParameterError(f"units and cohorts need one entry per instance ({n_inst}).")
    return train_t, inst_t, units, cohorts


class _TrackedLoss:
    """The mean token loss as a function of the tracked parameters (flattened to
    ``theta``), and its damped Hessian-vector product over the Hessian's sample."""

    def __init__(self, torch, model, train_t, p):
        from torch.func import functional_call

        self.torch = torch
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
        self.names = names
        self.shapes = [tracked[k].shape for k in names]
        self.sizes = [tracked[k].numel() for k in names]
        dtype = tracked[names[0]].dtype
        work = torch.float64 if dtype == torch.float64 else torch.float32

        def loss(params, batch):
            out = functional_call(model, ({**frozen, **params}, buffers), (batch,))
            logits = out.logits if hasattr(out, "logits") else out
            logp = torch.log_softmax(logits[:, :-1].to(work), dim=-1)
            ll = logp.gather(-1, batch[:, 1:, None]).squeeze(-1)
            return -ll.mean()

        self.loss = loss
        self.theta = self.flat(tracked)
        self.n_train = train_t.shape[0]
        hess_t = _hessian_sample(torch, train_t, p)
        self.n_hess = hess_t.shape[0]
        self.batches = torch.split(hess_t, p["batch_size"])
        self.shift = p["weight_decay"] + p["damping"]

    def unflat(self, v):
        split = self.torch.split(v, self.sizes)
        return {k: t.view(s) for k, t, s in zip(self.names, split, self.shapes)}

    def flat(self, d):
        return self.torch.cat([d[k].reshape(-1) for k in self.names])

    def gradient(self, x):
        from torch.func import grad

        return self.flat(grad(self.loss)(self.unflat(self.theta), x)).detach()

    def hvp(self, v):
        from torch.func import grad, jvp

        vd = self.unflat(v)
        total = self.torch.zeros_like(v)
        for b in self.batches:
            with warnings.catch_warnings():  # torch's forward-AD set-up, not the user's
                warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*",
                                        category=DeprecationWarning)
                _, hv = jvp(lambda q, b=b: grad(self.loss)(q, b), (self.unflat(self.theta),),
                            (vd,))
            total += self.flat(hv) * (b.shape[0] / self.n_hess)
        return total + self.shift * v


def _self_influences(torch, problem: _TrackedLoss, inst_t, p):
    """Each instance's self-influence: its gradient, the solve ``H h = g`` (direct, CG or
    LiSSA) and ``g' h / n`` (linear) or the loss change of the shifted parameters."""
    n_inst = inst_t.shape[0]
    theta, n_train = problem.theta, problem.n_train
    solve_info = []
    with torch.no_grad():
        if p["solver"] == "direct":
            eye = torch.eye(theta.numel(), dtype=theta.dtype)
            dense = torch.stack([problem.hvp(e) for e in eye], dim=1)
            dense = (dense + dense.T) / 2
    estimates, gnorms = np.empty(n_inst), np.empty(n_inst)
    for i in range(n_inst):
        x = inst_t[i:i + 1]
        g = problem.gradient(x)
        with torch.no_grad():
            if p["solver"] == "direct":
                h = torch.linalg.solve(dense, g)
                solve_info.append((1, 0.0))
            elif p["solver"] == "cg":
                h, info = _cg(problem.hvp, g, p["max_iter"], p["tol"])
                solve_info.append(info)
            else:
                h, info = _lissa(problem.hvp, g, p["max_iter"], p["lissa_scale"])
                solve_info.append(info)
            if p["approximation"] == "linear":
                estimates[i] = float(g @ h) / n_train
            else:
                shifted = problem.unflat(theta + h / n_train)
                estimates[i] = float(problem.loss(shifted, x)
                                     - problem.loss(problem.unflat(theta), x))
        gnorms[i] = float(g.norm())
    return estimates, gnorms, solve_info


def _result(p, name, estimates, gnorms, solve_info, units, cohorts, time, n_train,
            n_parameters, modules=None):
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
    extra = {"solver": info, "n_train": n_train, "n_parameters": n_parameters}
    if modules is not None:
        extra["tracked_modules"] = modules
    return CellResult.from_cells(
        **cells, alpha=p["alpha"], estimator=name, params=p,
        outcome="mean_token_loglik", assumption=INFLUENCE_ASSUMPTION, units=unit_frame,
        extra=extra)


def _output_module(torch, model):
    """The output embedding (LM head): ``get_output_embeddings()`` where the model has it,
    else the last ``torch.nn.Linear`` in module order."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None:
        linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
        head = linears[-1] if linears else None
    return head


def _ekfac(torch, model, train_t, inst_t, p):
    """Self-influence by EK-FAC (George et al. 2018; Grosse et al. 2023) through kronfluence.

    kronfluence works with summed token losses and the Fisher with labels drawn from the
    model (whose expectation is the Gauss-Newton Hessian), approximated block-diagonally, one
    block per tracked ``Linear``, in the eigenbasis of Kronecker factors with eigenvalues
    refitted on per-sequence gradients. With the damping scaled by ``T`` (predicted tokens
    per training sequence) and the scores rescaled, the estimate is
    ``(1/N) g' (G + (lambda + delta) I)^-1 g``, ``g`` the gradient of the instance's mean
    token loss and ``G`` the Gauss-Newton Hessian of the mean per-sequence loss: the linear
    estimate of the exact path with ``G`` for ``H``, restricted to the tracked modules.
    """
    kron = optional_import("kronfluence", "ekfac")
    modules, n_tracked = _ekfac_modules(torch, model, p)
    dtype = next(model.parameters()).dtype
    work = torch.float64 if dtype == torch.float64 else torch.float32
    seed = p["seed"]
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(2 ** 62))
    gen = torch.Generator().manual_seed(0 if seed is None else int(seed))

    def logits_of(mdl, batch):
        out = mdl(batch)
        return (out.logits if hasattr(out, "logits") else out)[:, :-1].to(work)

    def token_losses(logits, targets):
        logp = torch.log_softmax(logits, dim=-1)
        return -logp.gather(-1, targets[..., None]).squeeze(-1)

    task = _kronfluence_task(torch, modules, logits_of, token_losses, gen)
    gnorms = _tracked_gradient_norms(torch, model, modules, inst_t, logits_of, token_losses)
    self_scores = _kronfluence_self_scores(torch, kron, model, task,
                                           _hessian_sample(torch, train_t, p), inst_t,
                                           train_t.shape[1] - 1, p, work)
    # Scores of summed token losses: (T_x^2 / T) g' (G + (lambda + delta) I)^-1 g with g the
    # gradient of the mean token loss, T and T_x the predicted tokens per training sequence and
    # per instance, G the Gauss-Newton Hessian of the mean per-sequence loss.
    n_tokens = train_t.shape[1] - 1
    estimates = self_scores * n_tokens / ((inst_t.shape[1] - 1) ** 2 * train_t.shape[0])
    solve_info = [(np.nan, np.nan)] * inst_t.shape[0]
    return estimates, gnorms, solve_info, int(n_tracked), modules


def _hessian_sample(torch, train_t, p):
    """The training sequences the Hessian is estimated on: all, or ``hessian_sample`` of
    them drawn without replacement (seeded by ``seed``), in their order."""
    n_train = train_t.shape[0]
    if p["hessian_sample"] is None or p["hessian_sample"] >= n_train:
        return train_t
    if p["hessian_sample"] < 1:
        raise ParameterError("hessian_sample must be a positive number of sequences.")
    rng = np.random.default_rng(p["seed"])
    pick = np.sort(rng.choice(n_train, p["hessian_sample"], replace=False))
    return train_t[torch.as_tensor(pick)]


def _ekfac_modules(torch, model, p):
    """The ``Linear`` modules EK-FAC tracks (all but the output embedding, filtered by
    ``include``/``exclude``) and their number of parameters."""
    head = _output_module(torch, model)
    modules = [name for name, m in model.named_modules()
               if isinstance(m, torch.nn.Linear) and m is not head
               and (not p["include"] or any(s in name for s in p["include"]))
               and not any(s in name for s in p["exclude"])]
    if not modules:
        raise ParameterError("include/exclude leave no Linear module to track (EK-FAC tracks "
                             "the Linear modules other than the output embedding).")
    n_tracked = sum(prm.numel() for name in modules
                    for prm in model.get_submodule(name).parameters())
    return modules, n_tracked


def _kronfluence_task(torch, modules, logits_of, token_losses, gen):
    """kronfluence's task: summed token losses, with labels drawn from the model for the
    Fisher (the Gauss-Newton Hessian in expectation), over the tracked modules."""
    from kronfluence.task import Task

    class _LMTask(Task):
        def compute_train_loss(self, batch, model, sample=False):
            logits = logits_of(model, batch)
            if sample:  # labels drawn from the model: the Fisher, i.e. the Gauss-Newton
                with torch.no_grad():
                    probs = torch.softmax(logits.detach(), dim=-1).reshape(-1, logits.shape[-1])
                    targets = torch.multinomial(probs, 1, generator=gen).view(
                        logits.shape[:-1])
            else:
                targets = batch[:, 1:]
            return token_losses(logits, targets).sum()

        def compute_measurement(self, batch, model):
            return self.compute_train_loss(batch, model)

        def get_influence_tracked_modules(self):
            return modules

    return _LMTask()


def _tracked_gradient_norms(torch, model, modules, inst_t, logits_of, token_losses):
    """Each instance's gradient norm over the tracked modules, on the caller's (unwrapped)
    model."""
    tracked_params = [prm for name in modules for prm in model.get_submodule(name).parameters()]
    gnorms = np.empty(inst_t.shape[0])
    for i in range(inst_t.shape[0]):
        x = inst_t[i:i + 1]
        with torch.enable_grad():
            g = torch.autograd.grad(token_losses(logits_of(model, x), x[:, 1:]).mean(),
                                    tracked_params, allow_unused=True)
        gnorms[i] = float(torch.sqrt(sum((t ** 2).sum() for t in g if t is not None)))
    return gnorms


def _kronfluence_self_scores(torch, kron, model, task, hess_t, inst_t, n_tokens, p, work):
    """kronfluence's EK-FAC factors on ``hess_t`` and the instances' self-scores (in
    float64 where the model is), with the damping scaled by the predicted tokens."""
    import copy
    import tempfile

    from kronfluence.arguments import FactorArguments, ScoreArguments

    class _Tokens(torch.utils.data.Dataset):
        def __init__(self, ids):
            self.ids = ids

        def __len__(self):
            return self.ids.shape[0]

        def __getitem__(self, i):
            return self.ids[i]

    wrapped = kron.prepare_model(copy.deepcopy(model), task)
    factor_args = FactorArguments(strategy="ekfac")
    score_args = ScoreArguments(damping_factor=(p["weight_decay"] + p["damping"]) * n_tokens)
    if work == torch.float64:
        for args, fields in ((factor_args, ("activation_covariance_dtype",
                                            "gradient_covariance_dtype",
                                            "per_sample_gradient_dtype", "lambda_dtype")),
                             (score_args, ("per_sample_gradient_dtype", "precondition_dtype",
                                           "score_dtype"))):
            for f in fields:
                setattr(args, f, torch.float64)
    with tempfile.TemporaryDirectory() as out, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        analyzer = kron.Analyzer("didmem", wrapped, task, cpu=True, disable_tqdm=True,
                                 output_dir=out, log_level=logging.WARNING)
        analyzer.fit_all_factors("ekfac", _Tokens(hess_t), per_device_batch_size=p["batch_size"],
                                 factor_args=factor_args)
        analyzer.compute_self_scores("self", "ekfac", _Tokens(inst_t),
                                     per_device_train_batch_size=p["batch_size"],
                                     score_args=score_args)
        scores = analyzer.load_self_scores("self")
    return scores["all_modules"].detach().cpu().numpy().astype(float)


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
