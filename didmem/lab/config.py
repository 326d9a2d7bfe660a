"""Settings of a lab run, checked once at construction.

A :class:`LabConfig` is a frozen dataclass: every field is a setting that changes what the run
writes, so the whole object goes into ``manifest.json`` and two runs with equal configs write
identical files. :func:`demo_config` and :func:`quick_config` give the two built-in scales.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

from .._validation import Boolean, Integral, Interval, OneOf, check_all, check_fits_memory
from ..errors import ParameterError

__all__ = ["LabConfig", "demo_config", "quick_config", "PLACEMENTS", "REPEAT_GAPS",
           "DEFAULT_METRICS"]

PLACEMENTS = ("spread", "last_batch")
REPEAT_GAPS = ("geometric", "uniform")
EXACT_CHOICES = ("all", "auto")
DEFAULT_METRICS = ("mean_token_loglik", "sequence_loglik", "token_accuracy")


_SEVERAL_RUNS = ("runs", "vary_init", "track", "rare_share", "rare_jump")
"""The settings of several runs (and ``track``, and the rare instances): left out of
:meth:`LabConfig.to_dict` at their defaults, so that a single run's manifest (and so its
reuse) is as before they existed."""


def _fail(name: str, rule: str, value) -> None:
    raise ParameterError(f"The {name!r} parameter of LabConfig must be {rule}. Got {value!r}.")


@dataclass(frozen=True)
class LabConfig:
    """Every setting of a lab run: corpus, design, model, optimiser, ground truth, scoring.

    Parameters
    ----------
    seed : int
        Master seed. The language, the instances, the data order, the placement of analysed
        instances, the model initialisation and the subset design each draw from their own
        stream spawned from it.
    n_words : int
        Size of the Markov language's word vocabulary.
    zipf_exponent : float
        Exponent ``s`` of the Zipfian laws (word frequencies and successor ranks), ``p ∝ r^-s``.
    n_successors : int
        Number of likely successors of each word in the Markov chain.
    markov_weight : float
        Weight of the Markov successor law in each transition; the rest follows the Zipfian
        unigram law.
    n_names : int
        Number of first names and of last names; a secret names one pair.
    secret_digits : int
        Length of the random digit string in each instance's secret. Zero disables secrets.
    n_domains : int
        Domains of the generated language. Each has its own words and its own Markov chain
        (see ``domain_contrast``); every training instance belongs to a domain drawn
        uniformly, and the ``domain`` column of ``panel.parquet`` says which. Within a
        domain, trends are parallel by construction; across a mixture they are not.
    domain_contrast : float
        In ``[0, 1)``: domain ``d`` of ``D`` has Markov weight ``markov_weight * (1 -
        domain_contrast * d / (D - 1))``, so later domains are harder to predict (lower
        scores) and have less structure to learn (flatter trends).
    validation_mix : float, optional
        In ``[0, 1]``: the share of validation instances from the first domain, the rest
        spread evenly over the other domains; needs ``n_domains >= 2``. ``None`` (the default)
        draws validation domains like the training ones (uniformly), so both splits have
        the same composition in expectation.
    rare_share : float
        In ``[0, 1)``: the share of instances (training and validation alike, each drawn
        independently; a replacement is rare when the instance it replaces is) whose text
        is *rare*: each of its transitions jumps to a word drawn uniformly with probability
        ``rare_jump`` instead of following the chain, so it holds more rare words and less
        of the shared structure. With ``rare_share > 0`` the panel gets the instance
        features ``rare`` (0 or 1) and ``surprisal`` (the mean of ``-log p(w)`` over the
        instance's words ``w`` under the Zipfian unigram law, in nats), the moderators of
        :func:`didmem.heterogeneity` and :func:`didmem.moderator_slopes`. ``0`` (the
        default): no rare instances and no such columns.
    rare_jump : float
        In ``(0, 1]``: the share of a rare instance's transitions drawn uniformly.
    seq_len : int
        Tokens per instance (every instance has exactly this length; no padding).
    batch_size : int
        Instances per optimisation step.
    n_steps : int
        Optimisation steps. The run sees ``n_steps * batch_size`` training positions once each.
    checkpoint_every : int
        Steps between checkpoints; must divide ``n_steps``. Checkpoints are ``step0``,
        ``step{k}``, ..., ``step{n_steps}``, and the cohorts are ``k, 2k, ..., n_steps``.
    n_analysed : int
        Analysed training instances per cohort (macro-batch).
    burn_in : int
        Macro-batches at the start of training that hold no analysed instances (fillers
        only), so that the first cohort comes after the steepest part of the learning curve.
        Their checkpoints stay in the panel as pre-treatment periods.
    placement : {"spread", "last_batch"}
        Where analysed instances sit inside their macro-batch: at random positions anywhere in
        it, or in its last batch (the strongest instantaneous effect).
    n_validation : int
        Validation instances, never trained on (the never-treated units).
    validation_shift : float
        In ``[0, 1]``: the share of the validation instances' transitions drawn uniformly at
        random instead of from the language, so that the validation split comes from a shifted
        distribution. ``0`` draws it from the training distribution.
    duplicate_fraction : float
        In ``[0, 1)``: the share of filler (non-analysed) training positions taken by
        duplicated instances. Analysed instances are never duplicated.
    duplicate_copies : int
        Copies of each duplicated filler instance.
    exposures : int
        Most exposures of an analysed instance (:doc:`/repeated_exposure`). With ``K > 1``,
        each analysed instance with ``k - 1`` exposures is seen a ``k``-th time with
        probability ``repeat_share``, at a filler position of a later macro-batch drawn at
        random among those with room (staggered over training); the panel gets the columns
        ``cohort_2`` ... ``cohort_K`` and ``truth.parquet`` an ``exposure`` column with the
        exact truth of every exposure. ``1`` (the default): every instance is seen once.
    repeat_share : float
        In ``(0, 1]``: the probability that an instance with ``k - 1`` exposures gets a
        ``k``-th (with ``exposures > 1``).
    repeat_gap : {"geometric", "uniform"}
        Which later macro-batch (with room) a repeat falls in: ``"geometric"`` (the default)
        the next with probability 1/2, the one after with 1/4, and so on (renormalised over
        those with room), so that the early second-exposure cohorts, which only the first
        cohorts can reach but which hold the most post-treatment cells, are not left with a
        handful of instances; ``"uniform"`` any of them alike.
    hidden_size, n_layers, n_heads, intermediate_size : int
        Shape of the ``GPTNeoXForCausalLM``.
    max_positions : int
        ``max_position_embeddings`` of the model; ``seq_len`` may not exceed it.
    learning_rate : float
        Peak learning rate of AdamW.
    warmup_steps : int
        Steps of linear warm-up, followed by cosine decay to ``min_lr_ratio * learning_rate``.
    min_lr_ratio : float
        Final learning rate as a fraction of the peak.
    weight_decay : float
        AdamW weight decay.
    grad_clip : float
        Maximum gradient norm (``0`` disables clipping).
    exact_cohorts : "all", "auto" or tuple of int
        Cohorts (steps) with an exact counterfactual run: a run without only that cohort's
        analysed instances, resumed from the main run's state just before the cohort. Its
        truth is exact and becomes ``tau`` in ``truth.parquet``; cohorts without one take
        the twin's value (``exact`` is False there). ``"all"`` (the default) runs every
        cohort, ``"auto"`` up to three, near 30%, 60% and 90% of training (see
        :attr:`exact_cohort_steps`); ``()`` none (the truth is then the twin's).
    truth_draws : int
        Extra exact runs per exact cohort, each replacing the cohort's analysed instances
        with another draw of fresh instances (``1``, the default; ``0``: none). The spread of
        the direct truth over the draws is the truth's own noise: ``tau_se`` in
        ``truth.parquet``, every draw's truth in ``truth_draws.parquet``.
    n_subset_models : int
        Models trained on random subsets for the architectural estimator (``0``: none). Must
        be even: each analysed instance is IN for exactly half of them.
    metrics : tuple of str
        Metrics the transformers backend scores.
    score_batch_size : int
        Batch size of the scoring backend.
    extractable_suffix : int
        ``l`` of (k, l)-extractability when ``"extractable"`` is among the metrics; the
        prefix is the rest of the instance, ``k = seq_len - l``.
    threads : int
        Torch CPU threads. Results are bit-identical only for the same number of threads.
    text_files : tuple of str
        Optional plain-text files to use instead of the generated language: whitespace-split
        words, cut into ``seq_len``-token instances. Empty: generate the corpus.
    runs : int
        Training runs on the same corpus, each with its own data order (as PolyPythias' data
        seeds). Run 0 is the single run of this seed; each later run places the same
        analysed instances afresh (``n_analysed`` per cohort, at random), reshuffles the
        fillers, and has its own twin and exact runs. With ``runs > 1`` the panel and the
        truth get a ``run`` column; ``1`` (the default) writes the single-run files.
    vary_init : bool
        With ``runs > 1``: draw a new initialisation for every run after the first
        (weight-seed runs, as some PolyPythias seeds); by default every run starts from run
        0's initialisation, so that the runs differ only in their data order.
    track : bool
        Score the main run with :class:`didmem.track.MemorisationTracker` while it trains
        (at step 0 and every checkpoint, in ``track/`` of the run's directory) instead of
        scoring its saved checkpoints afterwards; the panel is the same (the same forward
        pass on the same weights). Not with the metric ``reference_ratio``.
    """

    seed: int = 0
    # corpus
    n_words: int = 192
    zipf_exponent: float = 1.1
    n_successors: int = 8
    markov_weight: float = 0.9
    n_names: int = 24
    secret_digits: int = 10
    n_domains: int = 1
    domain_contrast: float = 0.9
    validation_mix: float | None = None
    rare_share: float = 0.0
    rare_jump: float = 0.5
    seq_len: int = 32
    # design
    batch_size: int = 16
    n_steps: int = 160
    checkpoint_every: int = 20
    n_analysed: int = 160
    burn_in: int = 1
    placement: str = "spread"
    n_validation: int = 512
    validation_shift: float = 0.0
    duplicate_fraction: float = 0.0
    duplicate_copies: int = 2
    exposures: int = 1
    repeat_share: float = 0.5
    repeat_gap: str = "geometric"
    # model
    hidden_size: int = 64
    n_layers: int = 2
    n_heads: int = 4
    intermediate_size: int = 256
    max_positions: int = 64
    # optimiser
    learning_rate: float = 2e-2
    warmup_steps: int = 10
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    # ground truth and subsets
    exact_cohorts: tuple | str = "all"
    truth_draws: int = 1
    n_subset_models: int = 0
    # scoring and execution
    metrics: tuple = DEFAULT_METRICS
    score_batch_size: int = 64
    extractable_suffix: int = 12
    threads: int = 1
    text_files: tuple = field(default_factory=tuple)
    # several runs
    runs: int = 1
    vary_init: bool = False
    track: bool = False

    _constraints: ClassVar[dict] = {
        **{name: Integral(1) for name in (
            "n_words", "n_successors", "n_names", "seq_len", "batch_size", "n_steps",
            "checkpoint_every", "n_analysed", "n_validation", "hidden_size", "n_layers",
            "n_heads", "intermediate_size", "max_positions", "score_batch_size", "threads",
            "extractable_suffix", "n_domains", "exposures", "runs")},
        **{name: Integral(0) for name in (
            "secret_digits", "warmup_steps", "n_subset_models", "seed", "burn_in",
            "truth_draws")},
        "domain_contrast": Interval(0, 1, closed="left"),
        "validation_mix": Interval(0, 1, allow_none=True),
        "duplicate_copies": Integral(2),
        "markov_weight": Interval(0, 1),
        "validation_shift": Interval(0, 1),
        "repeat_share": Interval(0, 1, closed="right"),
        "duplicate_fraction": Interval(0, 1, closed="left"),
        "rare_share": Interval(0, 1, closed="left"),
        "rare_jump": Interval(0, 1, closed="right"),
        "min_lr_ratio": Interval(0, 1),
        "zipf_exponent": Interval(0, None, closed="neither"),
        "learning_rate": Interval(0, None, closed="neither"),
        "weight_decay": Interval(0, None),
        "grad_clip": Interval(0, None),
        "placement": OneOf(*PLACEMENTS),
        "repeat_gap": OneOf(*REPEAT_GAPS),
        "vary_init": Boolean(),
        "track": Boolean(),
    }

    def __post_init__(self):
        for name in ("exact_cohorts", "metrics", "text_files"):
            value = getattr(self, name)
            if name == "exact_cohorts" and value in EXACT_CHOICES:
                continue
            if isinstance(value, str):
                value = (value,)
            object.__setattr__(self, name, tuple(value))
        object.__setattr__(self, "text_files", tuple(str(p) for p in self.text_files))
        if self.exact_cohorts not in EXACT_CHOICES:
            try:
                cohorts = tuple(int(g) for g in self.exact_cohorts)
            except (TypeError, ValueError):
                _fail("exact_cohorts", '"all", "auto" or a sequence of cohort steps',
                      self.exact_cohorts)
            object.__setattr__(self, "exact_cohorts", cohorts)
        check_all("LabConfig", dataclasses.asdict(self), self._constraints)
        if self.validation_mix is not None and self.n_domains < 2:
            raise ParameterError(
                f"validation_mix={self.validation_mix} needs a corpus of several domains; "
                f"set n_domains to 2 or more (it is {self.n_domains}).")
        if self.rare_share > 0 and self.text_files:
            raise ParameterError("rare_share > 0 needs the generated language; it is not "
                                 "available with text_files.")
        if self.n_domains > 1 and self.text_files:
            raise ParameterError("n_domains > 1 needs the generated language; it is not "
                                 "available with text_files.")
        if not self.metrics:
            _fail("metrics", "a non-empty sequence of metric names", self.metrics)
        if self.track and "reference_ratio" in self.metrics:
            raise ParameterError("track=True scores the main run while it trains, without a "
                                 "reference model: drop 'reference_ratio' from the metrics.")
        self._check_design()

    def _check_memory(self) -> None:
        """Refuse sizes whose arrays cannot fit in this machine's memory, naming the largest
        part's parameter, before torch or numpy fail with their own messages: the model with
        its gradients and Adam's two moments (16 bytes a parameter; the vocabulary about
        ``n_words + n_names`` tokens; rotary caches of ``max_positions`` rows), the corpus's
        token ids, and the truth's draws of replacements."""
        hidden, vocab = self.hidden_size, self.n_words + self.n_names + 16
        parts = {
            "hidden_size": 16.0 * (2 * vocab * hidden + self.n_layers * (
                4 * hidden ** 2 + 2 * hidden * self.intermediate_size)),
            "max_positions": 8.0 * self.max_positions * hidden,
            "n_validation": 16.0 * (self.batch_size * self.n_steps + self.n_validation)
            * self.seq_len,
            "truth_draws": 8.0 * self.truth_draws * self.n_analysed * max(
                self.n_steps // self.checkpoint_every, 1),
        }
        biggest = max(parts, key=parts.get)
        name = biggest
        if biggest == "hidden_size":  # the model: name its largest factor
            name = max(("hidden_size", "n_words", "intermediate_size", "n_layers"),
                       key=lambda n: {"hidden_size": hidden * hidden * self.n_layers,
                                      "n_words": vocab * hidden,
                                      "intermediate_size": hidden * self.intermediate_size
                                      * self.n_layers,
                                      "n_layers": 0}[n])
        elif biggest == "n_validation" and self.batch_size * self.n_steps > self.n_validation:
            name = "batch_size"
        what = {"hidden_size": "the model, its gradients and optimiser state",
                "max_positions": "the model's position caches",
                "n_validation": "the corpus's token ids",
                "truth_draws": "the truth's draws of replacements"}[biggest]
        check_fits_memory("LabConfig", name, getattr(self, name), sum(parts.values()), what)

    def _check_design(self) -> None:
        self._check_memory()
        k, T = self.checkpoint_every, self.n_steps
        if T % k:
            raise ParameterError(
                f"checkpoint_every={k} does not divide n_steps={T}: every macro-batch must end "
                f"at a checkpoint. Choose n_steps a multiple of {k}, such as {(T // k + 1) * k}."
            )
        if self.burn_in >= T // k:
            raise ParameterError(
                f"burn_in={self.burn_in} leaves no cohort: training has {T // k} macro-batches "
                f"of checkpoint_every={k} steps.")
        capacity = self.batch_size if self.placement == "last_batch" else self.batch_size * k
        where = "a batch" if self.placement == "last_batch" else "a macro-batch"
        if self.n_analysed > capacity:
            raise ParameterError(
                f"n_analysed={self.n_analysed} analysed instances per cohort do not fit in {where}, "
                f"which holds {capacity} instances (batch_size={self.batch_size}, "
                f"placement={self.placement!r})."
            )
        if self.seq_len > self.max_positions:
            raise ParameterError(
                f"seq_len={self.seq_len} exceeds the model's max_positions={self.max_positions}."
            )
        if self.hidden_size % self.n_heads:
            raise ParameterError(
                f"hidden_size={self.hidden_size} must be a multiple of n_heads={self.n_heads}."
            )
        secret_len = self.secret_len
        if secret_len and secret_len + 2 > self.seq_len:
            raise ParameterError(
                f"seq_len={self.seq_len} is too short for a secret of {secret_len} tokens plus "
                "a beginning token and one word."
            )
        if self.exact_cohorts in EXACT_CHOICES:
            return self._check_rest()
        bad = [g for g in self.exact_cohorts if g not in self.cohorts]
        if bad:
            raise ParameterError(
                f"exact_cohorts {bad} are not cohorts of this run; cohorts are the checkpoints "
                f"{list(self.cohorts)}."
            )
        if len(set(self.exact_cohorts)) != len(self.exact_cohorts):
            _fail("exact_cohorts", "free of repeats", self.exact_cohorts)
        self._check_rest()

    def _check_rest(self) -> None:
        if self.n_subset_models % 2:
            raise ParameterError(
                f"n_subset_models={self.n_subset_models} must be even: each analysed instance "
                "is IN for exactly half of the subset models."
            )
        if self.warmup_steps > self.n_steps:
            _fail("warmup_steps", f"at most n_steps={self.n_steps}", self.warmup_steps)
        if self.runs > 1 and self.exposures > 1:
            raise ParameterError(
                f"runs={self.runs} with exposures={self.exposures} is not available: the runs "
                "must train the same corpus, and the repeats are drawn per order. Use "
                "exposures=1 with several runs.")
        if self.vary_init and self.runs == 1:
            raise ParameterError("vary_init=True draws a new initialisation for the runs after "
                                 "the first; it needs runs >= 2.")

    @property
    def secret_len(self) -> int:
        """Tokens of one secret: ``name FIRST LAST code d1`` to ``dD`` (0 without secrets)."""
        return self.secret_digits + 4 if self.secret_digits else 0

    @property
    def exact_cohort_steps(self) -> tuple:
        """The cohorts with an exact run, ``"all"`` and ``"auto"`` resolved.

        ``"all"`` is every cohort; ``"auto"`` takes the cohorts ending nearest to 30%, 60%
        and 90% of training (the
        ``round(f * J)``-th of ``J`` cohorts), without repeats.
        """
        if self.exact_cohorts == "all":
            return self.cohorts
        if self.exact_cohorts != "auto":
            return self.exact_cohorts
        J = len(self.cohorts)
        picks = sorted({max(1, round(f * J)) for f in (0.3, 0.6, 0.9)})
        return tuple(self.cohorts[i - 1] for i in picks)

    @property
    def checkpoints(self) -> tuple:
        """Steps with a saved checkpoint, ``0, k, ..., n_steps``."""
        return tuple(range(0, self.n_steps + 1, self.checkpoint_every))

    @property
    def cohorts(self) -> tuple:
        """Treatment steps of the analysed instances: ``(b + 1) k, ..., n_steps`` with ``b``
        the ``burn_in`` macro-batches without analysed instances."""
        return self.checkpoints[1 + self.burn_in:]

    @property
    def n_positions(self) -> int:
        """Training positions in the single pass, ``n_steps * batch_size``."""
        return self.n_steps * self.batch_size

    def replace(self, **changes) -> LabConfig:
        """A copy with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Plain JSON-ready dictionary of every field."""
        out = dataclasses.asdict(self)
        for name in ("exact_cohorts", "metrics", "text_files"):
            if out[name] not in EXACT_CHOICES:
                out[name] = list(out[name])
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        for name in _SEVERAL_RUNS:  # a single run's settings as before several runs
            if out[name] == defaults[name]:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> LabConfig:
        """Inverse of :meth:`to_dict`."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ParameterError(f"Unknown LabConfig settings: {unknown}.")
        return cls(**data)


def demo_config(seed: int = 0, **changes) -> LabConfig:
    """The demo scale: 7 cohorts of 160 analysed instances after one burn-in macro-batch,
    with the exact truth for every cohort, in about a minute on 2 cores. With
    ``exposures > 1`` the macro-batches are twice as long (checkpoints every 40 of 320
    steps) and hold 320 analysed instances each, the same share of the positions: the
    history-matched comparison of a later exposure splits a cohort into repeated instances
    and their controls, and needs both in numbers (:doc:`/repeated_exposure`)."""
    settings = {"seed": seed}
    if changes.get("exposures", 1) > 1:
        settings.update(n_steps=320, checkpoint_every=40, n_analysed=320)
    settings.update(changes)
    return LabConfig(**settings)


def quick_config(seed: int = 0, **changes) -> LabConfig:
    """The quick scale for tests: 4 cohorts of 192 analysed instances after one burn-in
    macro-batch, exact truth for every cohort, in seconds (batch size, burn-in and learning
    rate as the demo's). With ``exposures > 1`` the cohorts hold 96 analysed instances, so
    that later macro-batches have filler positions for the repeats."""
    settings = {
        "seed": seed,
        "n_words": 96,
        "n_names": 12,
        "secret_digits": 8,
        "seq_len": 24,
        "n_steps": 60,
        "checkpoint_every": 12,
        "n_analysed": 192,
        "n_validation": 384,
        "intermediate_size": 128,
        "max_positions": 32,
        "warmup_steps": 4,
    }
    if changes.get("exposures", 1) > 1:
        settings["n_analysed"] = 96
    settings.update(changes)
    return LabConfig(**settings)
