"""Which data trained: the surrogate's per-class, per-device state (netsim's formalization).

The progress model of :mod:`netsim.training.loss` counts *how much* training an epoch adds
(its effective samples, with every term of that module: participants, local steps, staleness,
edge rounds, skew). This module adds *which data* it was, so that training the same few
devices again and again, or devices that hold few of the classes, costs what real training
shows it costs (measured: docs/curves.md, ``benchmarks/progress_fidelity.py``).

State
-----
Per class c (C classes; IID data is one class, every device holding the population's mix):

* ``m_c``: effective samples of class c: each epoch's effective samples ``G`` split by the
  class mix of the samples it trained, ``G * t_c / sum(t)``, ``t_c = sum_i d_i / D_i * h_ic``
  (device i trained d_i of its D_i samples, holding ``h_ic`` of class c);
* ``U_c``: distinct samples of class c trained so far: ``sum_i u_i / D_i * h_ic``, ``u_i`` the
  most of its samples device i has trained in one epoch (a device that uses part of its data
  trains a prefix of it, as the real backends do).

Loss
----
With ``p_c`` the population's share of class c (the fleet's data; the test set is drawn
from the same data set, stratified, so its classes weigh the same)::

    n_c   = m_c / p_c                      (population-equivalent effective samples)
    floor_c = min(L0, floor(v) + data_floor * ((N_ref / (U_c / p_c)) ** data_exponent - 1)+)
    l_c   = max(mean_v(n_c), floor_c)
            + class_interference * (L0 - mean_v(n_bar)) * (1 - min(1, n_c / n_bar)) ** g
    n_bar = sum_c p_c n_c,   loss = sum_c p_c l_c

``floor(v), h_v, a_v, mean_v`` are the variant's fitted curve
(:func:`netsim.training.loss.curve_params`),
``N_ref`` the distinct samples that curve was fitted with (``reference_samples``). The data
floor is a learning curve in the data covered (training to convergence on U distinct samples
ends ``data_floor * ((N_ref / U) ** data_exponent - 1)`` above the fitted floor; measured on
the digits MLP by training one device of U samples 150 epochs: U = 60 ... 960, docs/curves.md):
a class follows the fitted curve until it meets its data floor, then stays there (real
training's knee: the small data set is learnt as fast as the large one, then overfits);
the interference term (``g`` its ``interference_exponent``) is the loss a class the model has
trained less than the others pays, because the model learns to predict the classes it saw
(fitted to the lowest loss of fixed device sets of 1 to 40 devices trained 120 epochs under
Dirichlet 0.1 and 1.0 and 2-class shards: RMS log error 0.30, docs/curves.md).

Reductions (tests/test_coverage.py): IID data with at least ``N_ref`` distinct samples
trained (or no ``reference_samples``) gives today's curve, ``mean_v(sum of G)``, to 1e-12;
every device trained every epoch gives ``n_c = sum(G)`` for every class, so under skew too
the only term left is the data floor, which full coverage leaves at 0.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from netsim.training.labels import label_histograms


class CoverageState:
    """The per-class state of one run (module docstring): built once, stepped each epoch.

    Parameters
    ----------
    ids_index: device id -> row (the device table's index).
    samples: each device's samples (the data it holds), by row.
    histograms: each device's label histogram, (N, C), rows summing to ``samples``; None: IID
        (one class).
    reference_samples: N_ref (None: no data floor).
    """

    def __init__(self, ids_index: Mapping[str, int], samples: np.ndarray,
                 histograms: np.ndarray | None, reference_samples: float | None) -> None:
        self._index = ids_index
        self._samples = np.asarray(samples)  # (the device table's own array: no copy)
        self._hist = histograms
        self.histograms = histograms
        """Each device's label histogram (None: IID), read-only."""
        if histograms is not None:
            histograms.setflags(write=False)
        if histograms is None:
            self.share = np.ones(1)
        else:
            by_class = histograms.sum(axis=0)
            self.share = by_class / by_class.sum() if by_class.sum() > 0 \
                else np.full(histograms.shape[1], 1.0 / histograms.shape[1])
        self.classes = len(self.share)
        self.m = np.zeros(self.classes)
        """Effective samples per class, m_c."""
        self.distinct = np.zeros(self.classes)
        """Distinct samples trained per class, U_c."""
        # the most of its samples each device trained in one epoch (int32: 4 bytes a device)
        self._used = np.zeros(len(self._samples), dtype=np.int32) \
            if reference_samples is not None else None
        self.reference_samples = reference_samples

    def trained_mix(self, samples_by_device: Mapping[str, float]) -> np.ndarray:
        """The class mix ``t_c / sum(t)`` of an epoch's trained samples (device id -> samples
        it trained), and the distinct samples it adds to ``U_c`` (as a side effect)."""
        mix, distinct, rows, used = self.preview(samples_by_device)
        self.record(rows, used, distinct)
        return mix

    def record(self, rows: np.ndarray, used: np.ndarray, distinct: np.ndarray) -> None:
        """Keep what :meth:`preview` said an epoch trains: each row's most trained samples
        (``used``, int32) and ``U_c`` after it (``distinct``, samples); nothing without a
        data floor."""
        if self._used is not None:
            np.maximum.at(self._used, rows, used)
            self.distinct = distinct

    def preview(self, samples_by_device: Mapping[str, float]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """What an epoch that trains ``samples_by_device`` (device id -> samples) would do,
        changing nothing: its class mix (:meth:`trained_mix`), ``U_c`` after it (samples;
        :attr:`distinct` itself without a data floor), and the rows and per-row samples
        (int32) that :meth:`trained_mix` then records as each device's most trained."""
        rows = np.fromiter((self._index[d] for d in samples_by_device), dtype=np.int64,
                           count=len(samples_by_device))
        used = np.fromiter(samples_by_device.values(), dtype=float, count=len(rows))
        held, more, added = self._taken(rows, used)
        distinct = self.distinct
        most = np.zeros(0, dtype=np.int32) if more is None else more.astype(np.int32)
        if self._hist is None:
            if added is not None:
                distinct = distinct + float(added.sum())
            return np.ones(1), distinct, rows, most
        h = self._hist[rows]
        if added is not None:
            distinct = distinct + np.divide(added, held, out=np.zeros_like(used),
                                            where=held > 0) @ h
        t = np.divide(used, held, out=np.zeros_like(used), where=held > 0) @ h
        s = t.sum()
        return (t / s if s > 0 else np.zeros(self.classes)), distinct, rows, most

    def preview_many(self, rows: np.ndarray, takes: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`preview` of K epochs at once, changing nothing: epoch k trains ``takes[k,
        j]`` samples of device row ``rows[j]`` (``takes`` (K, R), samples; 0: not a
        participant). Returns each epoch's class mix (K, C) and ``U_c`` after it (K, C;
        :attr:`distinct` repeated without a data floor): the same formulas as
        :meth:`preview`, row by row."""
        rows = np.asarray(rows, dtype=np.int64)
        used = np.asarray(takes, dtype=float)
        held, _, added = self._taken(rows, used)
        distinct = np.broadcast_to(self.distinct, (len(used), self.classes))
        if self._hist is None:
            if added is not None:
                distinct = distinct + np.sum(added, axis=1, keepdims=True)
            return np.ones((len(used), 1)), np.array(distinct)
        h = self._hist[rows]
        if added is not None:
            distinct = distinct + np.divide(added, held, out=np.zeros_like(used),
                                            where=held > 0) @ h
        t = np.divide(used, held, out=np.zeros_like(used), where=held > 0) @ h
        s = t.sum(axis=1, keepdims=True)
        mix = np.divide(t, s, out=np.zeros_like(t), where=s > 0)
        return mix, np.array(distinct)

    def copy(self) -> CoverageState:
        """An independent copy of the state (a planner's what-if replay); the histograms and
        the device table's samples are shared, read-only."""
        other = object.__new__(CoverageState)
        other.__dict__.update(self.__dict__)
        other.m = self.m.copy()
        other.distinct = np.array(self.distinct, dtype=float, copy=True)
        other._used = None if self._used is None else self._used.copy()
        return other

    def _taken(self, rows: np.ndarray, used: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """What training ``used`` samples of device rows ``rows`` (a vector, or a matrix
        with one row per what-if epoch) does to the distinct data: the rows' held samples,
        each row's most trained samples after it and the distinct samples it adds (both None
        without a data floor). A device that uses part of its data trains a prefix of it."""
        held = self._samples[rows].astype(float)
        if self._used is None:
            return held, None, None
        before = self._used[rows].astype(float)
        more = np.maximum(np.minimum(np.rint(used), held), before)
        return held, more, more - before

    def add(self, gain: float, mix: np.ndarray) -> None:
        """Add an epoch's effective samples ``gain`` split by its class ``mix``."""
        self.m += gain * mix

    def population_samples(self, m: np.ndarray | None = None) -> np.ndarray:
        """n_c = m_c / p_c (population-equivalent effective samples per class) of this
        state, or of the effective samples per class ``m`` (samples) in its place."""
        m = self.m if m is None else m
        return np.divide(m, self.share, out=np.zeros_like(m), where=self.share > 0)

    def distinct_population(self, distinct: np.ndarray | None = None) -> np.ndarray | None:
        """U_c / p_c per class (None without a data floor), of this state or of ``distinct``
        (U_c, samples) in its place."""
        if self.reference_samples is None:
            return None
        u = np.asarray(self.distinct if distinct is None else distinct, dtype=float)
        return np.divide(u, self.share, out=np.zeros_like(u), where=self.share > 0)

    def carry(self, predictor, v_from: int, v_to: int) -> None:
        """A variant switch: each class's n_c carried by the progress model's own rule
        (:meth:`netsim.training.loss.LossPredictor.carry`)."""
        a = np.full(self.classes, v_from)
        b = np.full(self.classes, v_to)
        n = np.asarray(predictor.carry(self.population_samples(), a, b), dtype=float)
        self.m = n * self.share


def coverage_loss(n: np.ndarray, distinct: np.ndarray | None, share: np.ndarray, *,
                  floor: float, half: float, exponent: float, initial: float,
                  reference_samples: float | None, data_floor: float, data_exponent: float,
                  interference: float, interference_exponent: float = 1.0
                  ) -> float | np.ndarray:
    """The mean loss of the per-class state (module docstring): ``n`` the classes'
    population-equivalent effective samples, ``distinct`` their distinct samples (U_c / p_c;
    None: no data floor), the variant's curve (``floor``, ``half``, ``exponent``), the initial
    loss, and the coverage constants. One class with no data floor: the variant's mean curve
    at ``n[0]``, exactly.

    Vectorised over states: ``n`` (and ``distinct``) of shape (K, C) give the K states' losses
    as an array (a planner rating K candidate epochs at once, :class:`netsim.training.loss.
    PlanningCoverage`); shape (C,) gives a float."""
    n = np.asarray(n, dtype=float)
    per_class = floor + (initial - floor) * (1.0 + n / half) ** -exponent
    if distinct is not None and reference_samples is not None and data_floor > 0:
        with np.errstate(divide="ignore"):
            rise = (reference_samples / np.maximum(distinct, 1e-300)) ** data_exponent - 1.0
        # the curve until it meets the data floor, then the floor (never above L0)
        per_class = np.maximum(per_class, np.minimum(
            initial, floor + data_floor * np.maximum(rise, 0.0)))
    if per_class.shape[-1] == 1:
        return float(per_class[0]) if per_class.ndim == 1 else per_class[..., 0]
    if interference > 0:
        n_bar = n @ share
        with np.errstate(divide="ignore", invalid="ignore"):
            mean_bar = floor + (initial - floor) * (1.0 + n_bar / half) ** -exponent
            lag = (1.0 - np.minimum(1.0, n / np.expand_dims(n_bar, -1))) ** interference_exponent
        extra = interference * np.expand_dims(initial - mean_bar, -1) * lag
        per_class = per_class + np.where(np.expand_dims(n_bar, -1) > 0, extra, 0.0)
    out = per_class @ share
    return float(out) if per_class.ndim == 1 else out


def coverage_for(model, training, ids_index: Mapping[str, int], samples: np.ndarray,
                 rng: np.random.Generator) -> CoverageState | None:
    """The run's coverage state, or None where no coverage term can act (IID data without a
    data floor: today's scalar state is exact). ``rng``: the histograms' draws (a stream of
    its own, so IID runs draw nothing)."""
    loss = model.loss
    if loss is None:
        return None
    floor_on = loss.reference_samples is not None and loss.data_floor > 0
    skewed = training.label_skewed
    if not skewed and not floor_on:
        return None
    hist = label_histograms(samples, loss.classes, training.dirichlet_alpha,
                            training.shards_per_device, rng,
                            label_bias=training.label_bias) if skewed else None
    return CoverageState(ids_index, samples, hist,
                         loss.reference_samples if floor_on else None)
