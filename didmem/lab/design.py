"""The experimental design of a lab run: corpus draws, data order, analysed sample, twins.

Training position ``p`` (0-based) is in batch ``b = p // batch_size``, trained at step
``b + 1`` as in Pythia; its cohort is the first checkpoint at or after that step. Each cohort
(macro-batch) holds ``n_analysed`` analysed instances; every other position holds a filler.
Each analysed instance has a *replacement*: a fresh instance from the same distribution that
takes its place in the twin run (all analysed instances replaced), the exact runs (one cohort's
replaced) and the subset models (the instances that are OUT replaced).

With ``exposures > 1`` some analysed instances are seen again at filler positions of later
macro-batches (*repeats*); replacing an instance replaces it at every position, and the exact
run of the ``k``-th exposure at cohort ``g`` replaces only the ``k``-th exposures that fall in
macro-batch ``g``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ParameterError
from ..panel import cohort_from_sequence_index
from .corpus import make_corpus

__all__ = ["LabDesign", "build_design", "STREAMS"]

#: Names of the independent random streams spawned from the master seed, in spawn order.
STREAMS = ("language", "train", "validation", "replacement", "placement", "duplicates",
           "init", "subsets", "repeats", "truth_draws", "rarity")


def _streams(seed: int) -> dict:
    children = np.random.SeedSequence(seed).spawn(len(STREAMS))
    return {name: np.random.Generator(np.random.PCG64(child))
            for name, child in zip(STREAMS, children)}


@dataclass(frozen=True)
class LabDesign:
    """Everything a run trains on and analyses, as arrays.

    Attributes
    ----------
    config : LabConfig
    corpus : MarkovCorpus or TextCorpus
    tokens : numpy.ndarray
        ``n_instances x seq_len`` token ids; the row index is the instance id. Training
        instances come first (numbered by first appearance in the order), then validation,
        then replacements.
    split : numpy.ndarray of str
        ``"train"``, ``"validation"`` or ``"replacement"`` per instance.
    order : numpy.ndarray
        Instance id at each training position.
    analysed_positions : numpy.ndarray
        Training positions of the analysed instances, ascending.
    analysed_ids, replacement_ids : numpy.ndarray
        Analysed instance at each of those positions, and its replacement.
    analysed_cohorts : numpy.ndarray
        Cohort (step) of each analysed instance.
    validation_ids : numpy.ndarray
        Validation instances.
    domains : numpy.ndarray
        Domain of every instance (all 0 with one domain); a replacement has the domain of
        the analysed instance it replaces.
    rare : numpy.ndarray of bool
        Whether each instance is rare (all False with ``rare_share = 0``); a replacement is
        rare when the analysed instance it replaces is.
    membership : numpy.ndarray
        ``n_subset_models x n_analysed_total`` boolean matrix: True where the analysed
        instance is IN the model's training data.
    subset_seeds : numpy.ndarray
        Initialisation seed of each subset model.
    init_seed : int
        Initialisation seed of the main, twin and exact runs.
    repeat_positions : numpy.ndarray
        Training positions of the repeats (later exposures of analysed instances), ascending.
    repeat_analysed : numpy.ndarray
        For each repeat, the index of its instance among the analysed ones.
    repeat_exposures : numpy.ndarray
        For each repeat, which exposure (2, 3, ...) it is.
    other_replacements : numpy.ndarray
        ``truth_draws x n_analysed_total`` instance ids: in draw ``j``, the replacement of
        each analysed instance in the extra exact run of its cohort (another cohort's
        replacement of the same domain, never trained on by the main run; see
        :meth:`exact_order`); -1 in cohorts without an exact run.
    """

    config: object
    corpus: object
    tokens: np.ndarray
    split: np.ndarray
    order: np.ndarray
    analysed_positions: np.ndarray
    analysed_ids: np.ndarray
    replacement_ids: np.ndarray
    analysed_cohorts: np.ndarray
    validation_ids: np.ndarray
    domains: np.ndarray
    membership: np.ndarray
    subset_seeds: np.ndarray
    init_seed: int
    repeat_positions: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    repeat_analysed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    repeat_exposures: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    other_replacements: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int64))
    rare: np.ndarray | None = None

    @property
    def rare_flags(self) -> np.ndarray:
        """:attr:`rare`, all False when the design has none."""
        if self.rare is None:
            return np.zeros(len(self.tokens), dtype=bool)
        return self.rare

    @property
    def position_cohorts(self) -> np.ndarray:
        """Cohort of every training position."""
        cfg = self.config
        return cohort_from_sequence_index(
            np.arange(cfg.n_positions), cfg.batch_size, cfg.checkpoint_every
        )

    def order_with(self, replace: np.ndarray, replacements: np.ndarray | None = None) -> np.ndarray:
        """The data order with the analysed instances flagged in ``replace`` swapped out.

        Parameters
        ----------
        replace : numpy.ndarray of bool
            One flag per analysed instance (aligned with ``analysed_positions``).
        replacements : numpy.ndarray, optional
            The instance that replaces each analysed instance (default
            ``replacement_ids``).
        """
        new = self.replacement_ids if replacements is None else np.asarray(replacements)
        order = self.order.copy()
        replace = np.asarray(replace, dtype=bool)
        order[self.analysed_positions[replace]] = new[replace]
        again = replace[self.repeat_analysed]
        order[self.repeat_positions[again]] = new[self.repeat_analysed[again]]
        return order

    @property
    def repeat_cohorts(self) -> np.ndarray:
        """Cohort (step) of every repeat."""
        cfg = self.config
        return cohort_from_sequence_index(self.repeat_positions, cfg.batch_size,
                                          cfg.checkpoint_every).astype(np.int64)

    def exposure_cohorts(self) -> np.ndarray:
        """Analysed instances x exposures: the cohort of each exposure (``inf`` where none)."""
        out = np.full((len(self.analysed_ids), self.config.exposures), np.inf)
        out[:, 0] = self.analysed_cohorts
        out[self.repeat_analysed, self.repeat_exposures - 1] = self.repeat_cohorts
        return out

    def exposure_groups(self, exposure: int, cohort: int) -> tuple:
        """The analysed instances (indices) treated by the exact run of ``exposure`` at
        ``cohort``, and their history-matched controls: the instances with the same earlier
        exposure cohorts and no ``exposure``-th exposure at all (the controls of
        ``DiDEstimator(exposure=k)``). Returns ``(treated, controls, history code of each
        control, history code of each treated)``."""
        cohorts = self.exposure_cohorts()
        sel = (self.repeat_exposures == exposure) & (self.repeat_cohorts == cohort)
        treated = np.sort(self.repeat_analysed[sel])
        earlier = cohorts[:, :exposure - 1]
        codes, inverse = np.unique(earlier, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        complete = np.isfinite(earlier).all(axis=1)
        controls = np.flatnonzero(complete & np.isinf(cohorts[:, exposure - 1])
                                  & np.isin(inverse, inverse[treated]))
        del codes
        return treated, controls, inverse[controls], inverse[treated]

    def exposure_order(self, exposure: int, cohort: int) -> np.ndarray:
        """Order of the exact run of exposure ``exposure`` (>= 2) at ``cohort``: only the
        repeats that are that exposure and fall in that cohort's macro-batch are replaced."""
        order = self.order.copy()
        sel = (self.repeat_exposures == exposure) & (self.repeat_cohorts == cohort)
        order[self.repeat_positions[sel]] = self.replacement_ids[self.repeat_analysed[sel]]
        return order

    def twin_order(self) -> np.ndarray:
        """Order of the twin run: every analysed instance replaced."""
        return self.order_with(np.ones(len(self.analysed_ids), dtype=bool))

    def exact_order(self, cohort: int, draw: int = 0) -> np.ndarray:
        """Order of the exact run for ``cohort``: only that cohort's analysed instances replaced.

        ``draw = 0`` replaces them with their own replacements; ``draw = j >= 1`` with the
        ``j``-th other draw of fresh instances (:attr:`other_replacements`), for the extra
        exact runs that measure the truth's own noise.
        """
        replacements = None if draw == 0 else self.other_replacements[draw - 1]
        return self.order_with(self.analysed_cohorts == cohort, replacements)

    def subset_order(self, model: int) -> np.ndarray:
        """Order of subset model ``model``: the analysed instances that are OUT replaced."""
        return self.order_with(~self.membership[model])


def _analysed_positions(cfg, rng: np.random.Generator) -> np.ndarray:
    macro = cfg.batch_size * cfg.checkpoint_every
    out = []
    for j in range(cfg.burn_in, cfg.burn_in + len(cfg.cohorts)):
        end = (j + 1) * macro
        start = end - cfg.batch_size if cfg.placement == "last_batch" else j * macro
        out.append(start + rng.choice(end - start, size=cfg.n_analysed, replace=False))
    return np.sort(np.concatenate(out))


def _repeats(cfg, analysed_pos: np.ndarray, is_analysed: np.ndarray,
             rng: np.random.Generator) -> tuple:
    """Positions, analysed instance and exposure number of every repeat.

    Exposure ``k`` goes to each instance with ``k - 1`` exposures with probability
    ``repeat_share``, at a free filler position of a macro-batch after its previous exposure,
    drawn among the later macro-batches with room (for ``placement="last_batch"``: room in
    their last batch), uniformly or, with ``repeat_gap="geometric"``, with probability
    proportional to ``2**-gap`` (``gap`` in macro-batches); the instances with the fewest later macro-batches choose
    first. An instance whose previous exposure is in the last
    macro-batch gets no further one.
    """
    empty = np.zeros(0, dtype=np.int64)
    if cfg.exposures == 1:
        return empty, empty, empty
    macro = cfg.batch_size * cfg.checkpoint_every
    n_macro = cfg.n_steps // cfg.checkpoint_every
    free = []
    for j in range(n_macro):
        start = (j + 1) * macro - cfg.batch_size if cfg.placement == "last_batch" else j * macro
        slots = np.arange(start, (j + 1) * macro)
        free.append(list(rng.permutation(slots[~is_analysed[slots]])))
    previous = analysed_pos // macro
    alive = np.ones(len(analysed_pos), dtype=bool)
    positions, analysed, exposures = [], [], []
    for k in range(2, cfg.exposures + 1):
        chosen = alive & (rng.random(len(analysed_pos)) < cfg.repeat_share)
        got = np.zeros_like(alive)
        # the instances with the fewest later macro-batches choose first
        for a in sorted(np.flatnonzero(chosen), key=lambda a: -previous[a]):
            later = [j for j in range(previous[a] + 1, n_macro) if free[j]]
            if previous[a] + 1 < n_macro and not later:
                raise ParameterError(
                    f"exposures={cfg.exposures} with repeat_share={cfg.repeat_share}: the "
                    f"later macro-batches have no filler position left for exposure {k} of "
                    f"analysed instance {a} (n_analysed={cfg.n_analysed} of the {macro} "
                    "positions of a macro-batch are taken). Lower repeat_share or n_analysed.")
            if not later:
                continue
            if cfg.repeat_gap == "uniform":
                j = later[int(rng.integers(len(later)))]
            else:
                p = 0.5 ** (np.asarray(later) - previous[a])
                j = later[int(rng.choice(len(later), p=p / p.sum()))]
            positions.append(free[j].pop())
            analysed.append(a)
            exposures.append(k)
            previous[a] = j
            got[a] = True
        alive = got
    order = np.argsort(positions, kind="stable")
    return (np.asarray(positions, dtype=np.int64)[order],
            np.asarray(analysed, dtype=np.int64)[order],
            np.asarray(exposures, dtype=np.int64)[order])


def _filler_labels(cfg, n_fill: int, rng: np.random.Generator) -> np.ndarray:
    """Labels of the filler positions; duplicated fillers share a label."""
    n_dup = int(cfg.duplicate_fraction * n_fill) // cfg.duplicate_copies
    n_unique = n_fill - n_dup * (cfg.duplicate_copies - 1)
    labels = np.concatenate([np.arange(n_unique), np.repeat(np.arange(n_dup),
                                                             cfg.duplicate_copies - 1)])
    return labels[rng.permutation(n_fill)]


def _domains(cfg, n_train: int, rngs: dict) -> tuple:
    """Domains of the training and validation instances (None, None with one domain).

    Training domains are uniform draws from the ``train`` stream; validation domains too,
    from the ``validation`` stream, unless ``validation_mix`` fixes the first domain's share
    (the rest go to the other domains in turn, in a random order).
    """
    D = cfg.n_domains
    if D == 1:
        return None, None
    train = rngs["train"].integers(0, D, n_train)
    n_val = cfg.n_validation
    if cfg.validation_mix is None:
        val = rngs["validation"].integers(0, D, n_val)
    else:
        n_first = int(round(cfg.validation_mix * n_val))
        rest = 1 + np.arange(n_val - n_first) % (D - 1)
        val = rngs["validation"].permutation(np.concatenate([np.zeros(n_first, np.int64),
                                                             rest]))
    return train.astype(np.int64), val.astype(np.int64)


def build_design(config) -> LabDesign:
    """Draw the corpus, data order, analysed sample, replacements and subset membership.

    Parameters
    ----------
    config : LabConfig

    Returns
    -------
    LabDesign
    """
    cfg = config
    rngs = _streams(cfg.seed)
    corpus = make_corpus(cfg, rngs["language"])

    P = cfg.n_positions
    analysed_pos = _analysed_positions(cfg, rngs["placement"])
    is_analysed = np.zeros(P, dtype=bool)
    is_analysed[analysed_pos] = True
    n_fill = P - len(analysed_pos)
    # labels: analysed positions get unique labels after the fillers'
    labels = np.empty(P, dtype=np.int64)
    labels[~is_analysed] = _filler_labels(cfg, n_fill, rngs["duplicates"])
    labels[is_analysed] = n_fill + np.arange(len(analysed_pos))
    repeat_pos, repeat_analysed, repeat_exposures = _repeats(cfg, analysed_pos, is_analysed,
                                                             rngs["repeats"])
    labels[repeat_pos] = n_fill + repeat_analysed
    # instance ids number the distinct instances by their first appearance in the order
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    order = rank[inverse.ravel()]
    n_train = len(first)

    analysed_ids = order[analysed_pos]
    train_dom, val_dom = _domains(cfg, n_train, rngs)
    rep_dom = None if train_dom is None else train_dom[analysed_ids]
    rare = _rare(cfg, n_train, analysed_ids, rngs["rarity"])
    train_shift, val_shift, rep_shift = _shifts(cfg, rare, n_train)
    train_tokens = corpus.sample(n_train, rngs["train"], domains=train_dom, shift=train_shift)
    val_tokens = corpus.sample(cfg.n_validation, rngs["validation"], shift=val_shift,
                               domains=val_dom)
    rep_tokens = corpus.sample(len(analysed_pos), rngs["replacement"], domains=rep_dom,
                               shift=rep_shift)
    n_all = n_train + cfg.n_validation + len(analysed_pos)
    domains = (np.zeros(n_all, dtype=np.int64) if train_dom is None
               else np.concatenate([train_dom, val_dom, rep_dom]))
    tokens = np.concatenate([train_tokens, val_tokens, rep_tokens])
    split = np.array(["train"] * n_train + ["validation"] * cfg.n_validation
                     + ["replacement"] * len(analysed_pos))
    validation_ids = n_train + np.arange(cfg.n_validation)
    replacement_ids = n_train + cfg.n_validation + np.arange(len(analysed_pos))

    analysed_cohorts = cohort_from_sequence_index(
        analysed_pos, cfg.batch_size, cfg.checkpoint_every
    ).astype(np.int64)

    m = cfg.n_subset_models
    sub_rng = rngs["subsets"]
    membership = np.zeros((m, len(analysed_pos)), dtype=bool)
    if m:
        base = np.repeat([True, False], m // 2)
        for i in range(len(analysed_pos)):
            membership[:, i] = base[sub_rng.permutation(m)]
    subset_seeds = sub_rng.integers(0, 2**31 - 1, size=m, dtype=np.int64)
    init_seed = int(rngs["init"].integers(0, 2**31 - 1))
    other = _other_replacements(cfg, analysed_cohorts, replacement_ids,
                                replacement_strata(domains, rare), rngs["truth_draws"])

    return LabDesign(
        config=cfg,
        corpus=corpus,
        tokens=tokens,
        split=split,
        order=order,
        analysed_positions=analysed_pos,
        analysed_ids=analysed_ids,
        replacement_ids=replacement_ids,
        analysed_cohorts=analysed_cohorts,
        validation_ids=validation_ids,
        domains=domains,
        membership=membership,
        subset_seeds=subset_seeds,
        init_seed=init_seed,
        repeat_positions=repeat_pos,
        repeat_analysed=repeat_analysed,
        repeat_exposures=repeat_exposures,
        other_replacements=other,
        rare=rare,
    )


def replacement_strata(domains: np.ndarray, rare) -> np.ndarray:
    """What another replacement draw must share with an instance: its domain, and with rare
    instances also whether it is rare (``2 * domain + rare``)."""
    return domains if rare is None else 2 * domains + np.asarray(rare, dtype=np.int64)


def _rare(cfg, n_train: int, analysed_ids: np.ndarray, rng: np.random.Generator):
    """Whether each instance (training, validation, replacements) is rare; None without
    rare instances (and then nothing is drawn, so the other streams are as before)."""
    if not cfg.rare_share:
        return None
    drawn = rng.random(n_train + cfg.n_validation) < cfg.rare_share
    return np.concatenate([drawn, drawn[analysed_ids]])


def _shifts(cfg, rare, n_train: int) -> tuple:
    """The share of uniform transitions of the training, validation and replacement
    instances: ``validation_shift`` for the validation instances, and for a rare instance
    also ``rare_jump`` (independently: ``1 - (1 - a)(1 - b)``), one per instance. Without
    rare instances the scalars, as before."""
    if rare is None:
        return 0.0, cfg.validation_shift, 0.0
    n_val = cfg.n_validation
    jump = np.where(rare, cfg.rare_jump, 0.0)
    val = 1.0 - (1.0 - cfg.validation_shift) * (1.0 - jump[n_train:n_train + n_val])
    return jump[:n_train], val, jump[n_train + n_val:]


def _other_replacements(cfg, cohorts: np.ndarray, replacement_ids: np.ndarray,
                        domains: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each of ``cfg.truth_draws`` draws, another fresh replacement of every analysed
    instance of a cohort with an exact run: one of the other cohorts' replacements of the same domain, drawn without
    repetition within the cohort (those instances are never in the main run's order, so
    they are as fresh as the instance's own replacement)."""
    out = np.full((cfg.truth_draws, len(cohorts)), -1, dtype=np.int64)
    rep_domain = domains[replacement_ids]
    for j in range(cfg.truth_draws):
        for g in cfg.exact_cohort_steps:
            for d in np.unique(rep_domain[cohorts == g]):
                mine = np.flatnonzero((cohorts == g) & (rep_domain == d))
                pool = replacement_ids[(cohorts != g) & (rep_domain == d)]
                if pool.size < mine.size:
                    raise ParameterError(
                        f"truth_draws={cfg.truth_draws} needs other cohorts' replacements to "
                        f"stand in for cohort {int(g)}'s {mine.size} analysed instances of "
                        f"domain {int(d)}, but only {pool.size} exist; set truth_draws=0 or "
                        "use more cohorts.")
                out[j, mine] = rng.choice(pool, size=mine.size, replace=False)
    return out
