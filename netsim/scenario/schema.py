"""Scenario schema: typed, validated objects for everything a run needs.

Every field that has a unit carries it in its name; numbers are in that SI unit and strings
with units are converted (see :mod:`netsim.units`). Unknown keys are errors.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    Tag,
    field_serializer,
    model_validator,
)

from netsim.units import BitsPerSecond, Bytes, FlopPerSecond, Joules, JoulesPerBit, Seconds, Watts
from netsim.workload import Workload

#: Largest integers and floats the engine holds (int64 arrays, float sums that must stay
#: finite): values beyond are rejected with the range, never overflow inside a run.
MAX_SEED = 2**63 - 1
MAX_SAMPLES = 10**12
MAX_FLOAT = 1e30
#: Smallest FLOP/s and bit/s: slower rates make a run's times overflow to infinity.
MIN_RATE = 1e-9


def _range(low: str, bound: float, high: float = MAX_FLOAT) -> Any:
    """A pydantic Field: ``low`` is ``"gt"`` or ``"ge"`` ``bound``; at most ``high``."""
    lower: dict[str, Any] = {low: bound}
    return Field(**lower, le=high)


def _at_least_min_rate(value: float) -> float:
    if value < MIN_RATE:
        raise ValueError(f"{value:g} is below {MIN_RATE:g}, where a run's times overflow "
                         f"(allowed: {MIN_RATE:g} to the upper bound)")
    return value


_AT_LEAST_MIN_RATE = AfterValidator(_at_least_min_rate)
PositiveF = _range("gt", 0)
NonNegativeF = _range("ge", 0)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False,
                              use_attribute_docstrings=True)


class DeviceSpec(_Strict):
    """A device that can compute: FLOP/s, memory (bytes), power (W), local samples."""

    id: Annotated[str, Field(min_length=1)]
    flop_per_s: Annotated[FlopPerSecond, _range("gt", 0, 1e24), _AT_LEAST_MIN_RATE]
    memory_bytes: Annotated[Bytes, _range("gt", 0, 1e21)]
    power_busy_w: Annotated[Watts, _range("ge", 0, 1e9)]
    power_idle_w: Annotated[Watts, _range("ge", 0, 1e9)]
    samples: Annotated[int, Field(ge=0, le=MAX_SAMPLES)] = 0
    availability: Annotated[float, Field(gt=0, le=1)] = 1.0
    device_class: str | None = None
    power_sleep_w: Annotated[Watts, _range("ge", 0, 1e9)] | None = None
    """Power while online but not selected (W); absent: ``power_idle_w``, booked as idle
    (the static world's behaviour). Given: booked in the energy category sleep."""
    battery_j: Annotated[Joules, _range("gt", 0, 1e12)] | None = None
    """Battery capacity (J), full at the start; absent: mains powered. Every joule the device
    draws comes out of it; an empty battery takes the device offline for the rest of the run
    (no recharging: netsim's formalization)."""
    battery_min_fraction: Annotated[float, Field(ge=0, lt=1)] = 0.2
    """Below this fraction of ``battery_j`` the device does not volunteer (is not available)."""
    edges: Annotated[tuple[Annotated[str, Field(min_length=1)], ...],
                     Field(min_length=1, max_length=10_000)] | None = None
    """The edge aggregators (``edges[].id``) this device can reach, its default first
    (docs/hierarchical.md); absent: the first edge on its route to the aggregator."""


class EdgeSpec(_Strict):
    """An edge aggregator (docs/hierarchical.md): a server on a network node between devices
    and the cloud aggregator. It computes (aggregation) and meters energy like a device; the
    node it sits on forwards traffic as before."""

    id: Annotated[str, Field(min_length=1)]
    node: Annotated[str, Field(min_length=1)] | None = None
    """The network node it sits on (a link end that is not a device); absent: ``id``."""
    flop_per_s: Annotated[FlopPerSecond, _range("gt", 0, 1e24), _AT_LEAST_MIN_RATE]
    power_busy_w: Annotated[Watts, _range("ge", 0, 1e9)]
    power_idle_w: Annotated[Watts, _range("ge", 0, 1e9)]
    memory_bytes: Annotated[Bytes, _range("gt", 0, 1e21)] | None = None
    """Optional: memory (bytes); aggregation needs the model's bytes twice (netsim's)."""

    @property
    def node_id(self) -> str:
        """The network node it sits on."""
        return self.node if self.node is not None else self.id


class LinkSpec(_Strict):
    """A full-duplex link; bandwidth is per direction (bit/s), latency one way (s).

    On a shared medium (``medium``) the bandwidth is the station's rate r: what it gets alone
    in the cell. The radio figures belong to the link's device end (docs/wireless.md)."""

    a: Annotated[str, Field(min_length=1)]
    b: Annotated[str, Field(min_length=1)]
    bandwidth_bps: Annotated[BitsPerSecond, _range("gt", 0, 1e18), _AT_LEAST_MIN_RATE]
    latency_s: Annotated[Seconds, _range("ge", 0, 1e9)] = 0.0
    energy_j_per_bit: Annotated[JoulesPerBit, _range("ge", 0, 1.0)] = 0.0
    """Sender's cost per bit (J/bit; alpha_u of a radio), charged to the sending node."""
    link_type: str | None = None
    medium: str | None = None
    """Id of the shared medium (``media[].id``) this link is a member of; None: a private
    link."""
    rx_energy_j_per_bit: Annotated[JoulesPerBit, _range("ge", 0, 1.0)] = 0.0
    """Receiver's cost per bit (J/bit; alpha_d), charged to a receiving device."""
    radio_power_w: Annotated[Watts, _range("ge", 0, 1e6)] = 0.0
    """Base power (W; beta) the device end draws while it has a transfer in progress on this
    link (waiting for air time included)."""
    tail_s: Annotated[Seconds, _range("ge", 0, 1e6)] = 0.0
    """How long (s) the device end's radio stays in its high-power state after its last
    transfer on this link ends (cut short by a new transfer)."""
    tail_power_w: Annotated[Watts, _range("ge", 0, 1e6)] = 0.0
    """Power (W) of that tail."""
    goodput_factor: Annotated[float, Field(gt=0, le=1)] | None = None
    """The share of ``bandwidth_bps`` that carries payload (netsim.network.goodput: TCP over
    Ethernet 1448 / 1514 = 0.956 of a line rate); absent: the scenario's
    ``goodput_factor``."""


class MediumSpec(_Strict):
    """A shared medium: the air time of one wireless cell (docs/wireless.md).

    ``wifi``: one air-time budget for both directions of every member link; ``cellular``:
    uplink and downlink each their own budget. A flow from or to a station of rate r uses
    x / r of its budget; rates are max-min fair over every constraint jointly."""

    id: Annotated[str, Field(min_length=1)]
    kind: Literal["wifi", "cellular"]
    contention_onset_flows: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    """wifi: from this many active flows on, the budget shrinks (absent: never)."""
    contention_loss_per_flow: Annotated[float, Field(ge=0, le=1)] = 0.0
    """wifi: the budget's loss per active flow beyond the onset (fraction of air time)."""


#: How an upload encodes an unstructured variant's sparse weights (``model.sparse_upload``).
SparseUpload = Literal["values", "bitmap", "dense"]


class VariantSpec(_Strict):
    """A model version: the fractions of the full model's parameters and FLOP it keeps, and
    what kind of model it is (which sets its bytes: :meth:`ModelSpec.model_bytes`)."""

    name: Annotated[str, Field(min_length=1)]
    params_fraction: Annotated[float, Field(gt=0, le=1)]
    flop_fraction: Annotated[float, Field(gt=0, le=1)]
    kind: Literal["unstructured", "structured"] | None = None
    """``unstructured``: the full model with magnitude masks (``params_fraction`` of the
    parameters non-zero), sent as ``model.sparse_upload`` says; ``structured``: a smaller
    dense model (channel pruning), sent as its own ``params x params_fraction`` parameters;
    absent: a variant declared by its fractions, sent as ``params x params_fraction``
    parameters (netsim's count before 0.7.0: the zoo's variants, whose FLOP shrink with their
    parameters as a smaller model's do). ``model: {torch: ...}`` measures it."""


class AccuracyMap(_Strict):
    """Test accuracy from test loss (nats): ``chance + (top - chance) / (1 + (loss / loss_mid)
    ** exponent)``, and with a ``cutoff_exponent`` q that times ``max(0, 1 - (loss /
    chance_loss) ** q)``, where ``chance_loss = -ln(chance)`` is the cross-entropy of a
    uniform guess: a model at that loss is at chance (netsim's formalization, fitted per model
    to recorded (loss, accuracy) pairs; the cutoff lets the map fall to chance in the first
    rounds, as MNIST's runs do, without bending the curve where training spends its time)."""

    chance: Annotated[float, Field(ge=0, le=1)]
    top: Annotated[float, Field(ge=0, le=1)]
    loss_mid: Annotated[float, PositiveF]
    exponent: Annotated[float, Field(gt=0, le=100)]
    cutoff_exponent: Annotated[float, Field(gt=0, le=1000)] | None = None

    @model_validator(mode="after")
    def _cutoff_needs_chance(self) -> AccuracyMap:
        if self.cutoff_exponent is not None and not 0.0 < self.chance < 1.0:
            raise ValueError(f"cutoff_exponent needs 0 < chance < 1 (its loss is -ln(chance)); "
                             f"got chance {self.chance!r}")
        return self

    @property
    def chance_loss(self) -> float:
        """The loss of a uniform guess, ``-ln(chance)`` (nats): the cutoff's end."""
        return -math.log(self.chance)

    def accuracy(self, loss):
        """The accuracy at ``loss`` (nats; a float, or numpy-vectorised over an array)."""
        x = np.asarray(loss, dtype=float)
        gain = (self.top - self.chance) / (1.0 + (x / self.loss_mid) ** self.exponent)
        if self.cutoff_exponent is not None:
            gain = gain * np.maximum(0.0, 1.0 - (x / self.chance_loss) ** self.cutoff_exponent)
        out = self.chance + gain
        return float(out) if out.ndim == 0 else out

    def loss_for(self, accuracy):
        """The loss (nats) at which the map reaches ``accuracy`` (inf at or below chance, 0 at
        or above top; a float, or vectorised over an array): closed form without a cutoff,
        else bisection (the map falls with the loss) to a relative 1e-13."""
        a = np.asarray(accuracy, dtype=float)
        inside = (a > self.chance) & (a < self.top)
        safe = np.where(inside, a, 0.5 * (self.chance + self.top))
        ratio = (self.top - self.chance) / (safe - self.chance) - 1.0
        loss = self.loss_mid * ratio ** (1.0 / self.exponent)
        if self.cutoff_exponent is not None:
            lo, hi = np.zeros_like(loss), np.minimum(loss, self.chance_loss)  # (it only lowers)
            for _ in range(200):
                if np.all(hi - lo <= 1e-13 * hi):
                    break
                mid = 0.5 * (lo + hi)
                above = self.accuracy(mid) >= safe
                lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
            loss = lo
        out = np.where(inside, loss, np.where(a <= self.chance, np.inf, 0.0))
        return float(out) if out.ndim == 0 else out


class LossParams(_Strict):
    """Parameters of the surrogate loss model (formula in :mod:`netsim.training.loss`)."""

    initial_loss: Annotated[float, PositiveF]
    floor_full: Annotated[float, NonNegativeF]
    floor_prune: Annotated[float, NonNegativeF] = 0.0
    floor_exponent: Annotated[float, PositiveF] = 2.0
    samples_half: Annotated[float, PositiveF]
    exponent: Annotated[float, PositiveF]
    prune_progress_loss: Annotated[float, NonNegativeF] = 1.0
    heterogeneity: Annotated[float, NonNegativeF] = 0.0
    participant_exponent: Annotated[float, Field(ge=0, le=2)] = 0.0
    noise_run_sigma: Annotated[float, NonNegativeF] = 0.0
    noise_epoch_sigma: Annotated[float, NonNegativeF] = 0.0
    noise_heterogeneity: Annotated[float, NonNegativeF] = 0.0
    noise_level_exponent: Annotated[float, Field(ge=0, le=5)] = 0.0
    noise_prune: Annotated[float, Field(gt=-1, le=20)] = 0.0
    staleness_exponent: Annotated[float, Field(ge=0, le=10)] = 0.5
    """An update of staleness s counts as samples * (1 + s) ** -staleness_exponent
    (docs/async.md); 0.5 (FedBuff's 1/sqrt(1 + s) weighting) where nothing was fitted."""
    local_step_exponent: Annotated[float, Field(ge=0, le=2)] = 0.0
    """A round's progress grows as (local steps per participant) ** this: E local epochs of
    ceil(n / B) minibatch steps each (netsim.training.loss, docs/curves.md); 0: local steps
    do not matter (the default where nothing was fitted)."""
    local_epoch_exponent: Annotated[float, Field(ge=-2, le=2)] = 0.0
    """And as (local epochs E) ** this besides (negative: passes over the same data are worth
    less than fresh steps); 0 where nothing was fitted."""
    edge_round_efficiency: Annotated[float, Field(ge=0, le=1)] = 1.0
    """Hierarchical rounds (docs/hierarchical.md): each edge round after a cloud round's first
    counts its samples times rho = this / (1 + edge_heterogeneity / dirichlet_alpha)
    (netsim's formalization); 1 where nothing was fitted."""
    edge_heterogeneity: Annotated[float, NonNegativeF] = 0.0
    """How label skew (``training.dirichlet_alpha``) lowers rho; 0 where nothing was fitted."""
    edge_source: str = ""
    """Where the two edge-round constants come from (fitted, borrowed, or defaults)."""
    classes: Annotated[int, Field(ge=1, le=100_000)] = 10
    """Classes of the model's task: the surrogate's per-class state under label skew
    (netsim.training.coverage, docs/curves.md)."""
    reference_samples: Annotated[float, PositiveF] | None = None
    """The distinct training samples the curve was fitted with (its data set's training
    split): the surrogate's floor rises for training that has covered fewer (the data floor,
    netsim.training.coverage); None: no data floor (the term is off)."""
    data_floor: Annotated[float, NonNegativeF] = 0.0
    """The data floor's scale (nats): the loss floor of training on U distinct samples lies
    ``data_floor * ((reference_samples / U) ** data_exponent - 1)`` above the fitted floor
    for U below ``reference_samples`` (netsim's formalization); 0: off."""
    data_exponent: Annotated[float, Field(gt=0, le=10)] = 0.5
    """The data floor's power in the distinct samples (a learning curve's exponent)."""
    class_interference: Annotated[float, Field(ge=0, le=100)] = 0.0
    """Under label skew, a class trained less than the average loses ``class_interference x
    (initial_loss - mean loss) x (1 - its share of the average) ** interference_exponent``
    besides its own curve: the
    model learns to predict the classes it trained (netsim's formalization); 0: off."""
    interference_exponent: Annotated[float, Field(gt=0, le=100)] = 1.0
    """The interference term's power in ``1 - share``: above 1, a class trained a little
    less than the average pays little, one left out pays it all."""
    coverage_source: str = ""
    """Where the coverage constants (reference_samples, data_floor, data_exponent,
    class_interference) come from: fitted, borrowed, or defaults."""
    scale_source: str = ""
    """Where participant_exponent and heterogeneity come from when the base curve is a
    recorded one's and they were measured on a real backend (``netsim calibrate --coverage
    --base-curve``): the runs, and how samples_half was rescaled to keep the recorded curve."""
    accuracy: AccuracyMap | None = None
    """The model's test accuracy as a function of its loss (fitted to recorded pairs); None:
    no accuracy is reported."""
    variants: dict[str, VariantLossParams] = Field(default_factory=dict)
    source: str = ""


class VariantLossParams(_Strict):
    """Per-variant overrides of the surrogate's curve (from a per-variant fit)."""

    floor: Annotated[float, NonNegativeF] | None = None
    samples_half: Annotated[float, PositiveF] | None = None
    exponent: Annotated[float, PositiveF] | None = None


class TorchDataSpec(_Strict):
    """Your own data set for the torch backend: an ``.npz`` file with arrays ``x`` (N samples
    of the model's input shape, real numbers, trained as float32) and ``y`` (N integer labels
    0..C-1, C at most the model's outputs)."""

    npz: Annotated[str, Field(min_length=1)]
    """The file, relative to the scenario file."""


class TorchSource(_Strict):
    """A PyTorch model that netsim measures, places and trains (docs/byo-model.md)."""

    factory: Annotated[str, Field(min_length=1)]
    """``pkg.mod:factory``, ``path/file.py:factory`` (relative to the scenario file) or a
    built-in torch network (small-cnn, cnn-mnist, mlp-digits): a callable returning a
    ``torch.nn.Module``. A scenario file's factory is imported only with ``--allow-imports``."""
    input_shape: Annotated[tuple[Annotated[int, Field(ge=1, le=2**31)], ...],
                           Field(min_length=1, max_length=8)] | None = None
    """One sample's shape without the batch (``[1, 28, 28]``); absent: a built-in network's."""
    variants: Annotated[tuple[Annotated[str, Field(min_length=1)], ...],
                        Field(min_length=1, max_length=64)] | None = None
    """Which of the measured variants to keep (full, pruned-50, pruned-75, pruned-90,
    channels-50), full always first; absent: every variant measured."""
    data: Literal["mnist", "digits"] | TorchDataSpec | None = None
    """What ``training.backend: torch`` trains it on: a shipped set (``mnist``: 1x28x28,
    ``digits``: 64) or ``{npz: PATH}``; absent: a built-in network's own set (your own
    model needs one with the torch backend)."""

    @model_validator(mode="after")
    def _shape_known(self) -> TorchSource:
        from netsim.torchnet import TORCH_MODEL_DATA

        if self.input_shape is None and self.factory not in TORCH_MODEL_DATA:
            raise ValueError("input_shape: required for a model that is not built in (one "
                             "sample's shape without the batch, e.g. [1, 28, 28])")
        return self


class TorchModelSpec(_Strict):
    """A model given as the PyTorch model itself (``model: {torch: {...}}``): its parameters,
    bytes per parameter, training FLOP per sample and variants are measured from it when the
    scenario is resolved (:mod:`netsim.torchnet.inspect`); nothing is typed by hand."""

    name: Annotated[str, Field(min_length=1)] | None = None
    """Shown in results; absent: the factory's name."""
    torch: TorchSource
    bytes_per_param: Annotated[float, _range("gt", 0, 1e3)] | None = None
    """Bytes per parameter on the wire and in memory; absent: measured (the parameters' bytes
    over their count: 4 for float32)."""
    sparse_upload: SparseUpload = "bitmap"
    """How an unstructured (pruned-NN) variant is sent: ``bitmap`` (its non-zero values and
    one bit per prunable weight), ``values`` (the non-zero values only: both ends know the
    mask) or ``dense`` (the whole model, zeros included); as ``ModelSpec.sparse_upload``."""
    loss: LossParams | None = None
    """The surrogate's curve; absent: the generic one (netsim/data/loss_params.yaml), not
    fitted to this model."""


class ModelSpec(_Strict):
    """A trainable model: size, training cost per sample, and its variants (index 0 = full)."""

    name: str = "custom"
    params: Annotated[float, _range("gt", 0, 1e15)]
    bytes_per_param: Annotated[float, _range("gt", 0, 1e3)] = 4.0
    train_flop_per_sample: Annotated[float, _range("gt", 0, 1e21)]
    variants: Annotated[tuple[VariantSpec, ...], Field(min_length=1)] = Field(
        default_factory=lambda: (VariantSpec(name="full", params_fraction=1.0, flop_fraction=1.0),)
    )
    sparse_upload: SparseUpload = "bitmap"
    """How an upload (and a download) encodes an ``unstructured`` variant (one with
    ``kind: unstructured``): ``bitmap`` (default: the non-zero values, ``params x
    params_fraction x bytes_per_param``, plus one bit per prunable weight, ``prunable_params /
    8`` bytes: self-describing, so every update decodes on its own, a stale asynchronous one
    trained under an older mask included), ``values`` (the values only: both ends know the
    mask, as when the server sends it once per variant change) or ``dense`` (the whole model,
    zeros included: ``params x bytes_per_param``). Structured variants and variants without a
    kind are dense models of their own size whatever this says."""
    prunable_params: Annotated[float, _range("gt", 0, 1e15)] | None = None
    """Parameters a magnitude mask covers (every weight of two or more dimensions; biases and
    norms are never pruned): one bit each in a ``bitmap`` upload; absent: all ``params``
    (an upper bound). ``model: {torch: ...}`` measures it."""
    loss: LossParams | None = None
    source: str = ""
    torch: TorchSource | None = None
    """The PyTorch model the figures were measured from (``model: {torch: ...}``, filled in
    when the scenario is resolved): the torch backend trains it and the baechi policy places
    its graph; None: a model given by its figures."""

    @model_validator(mode="after")
    def _full_first(self) -> ModelSpec:
        first = self.variants[0]
        if first.params_fraction != 1.0 or first.flop_fraction != 1.0:
            raise ValueError("variants[0] must be the full model (params_fraction = flop_fraction = 1)")
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ValueError("variant names must be unique")
        if self.prunable_params is not None and self.prunable_params > self.params:
            raise ValueError(f"prunable_params: {self.prunable_params:g} is more than the "
                             f"model's params ({self.params:g})")
        return self

    def model_bytes(self, variant: int) -> float:
        """Bytes (B) one download or upload of the given variant moves, netsim's one formula
        (every cost, planner and the engine read it):

        * a variant without a kind, or ``structured`` (a smaller dense model): its
          parameters, ``params x params_fraction x bytes_per_param``;
        * ``unstructured`` (masks on the full model), as ``sparse_upload`` says: ``values``:
          the kept values, ``params x params_fraction x bytes_per_param``; ``bitmap``: those
          plus one bit per prunable weight, ``ceil(prunable_params / 8)`` (``params`` when
          not given); ``dense``: the full model, ``params x bytes_per_param``.

        The full variant (``params_fraction`` 1) is the full model's bytes in every case.
        """
        v = self.variants[variant]
        kept = self.params * v.params_fraction * self.bytes_per_param
        if v.kind != "unstructured" or v.params_fraction >= 1.0 \
                or self.sparse_upload == "values":
            return kept
        if self.sparse_upload == "dense":
            return self.params * self.bytes_per_param
        prunable = self.params if self.prunable_params is None else self.prunable_params
        return kept + math.ceil(prunable / 8.0)

    def flop_per_sample(self, variant: int) -> float:
        """Training FLOP per sample (forward + backward) of the given variant."""
        return self.train_flop_per_sample * self.variants[variant].flop_fraction

    def aggregation_flop(self, variant: int, updates: int | float) -> float:
        """FLOP the aggregator spends averaging ``updates`` updates of the given variant
        (2 x its parameters per update: netsim's epoch, see the README's Model semantics)."""
        return 2.0 * self.params * self.variants[variant].params_fraction * updates

    def workload(self, variant: int) -> Workload:
        """What a training epoch of the given variant moves and computes per participant
        (its bytes both ways, its training FLOP per sample; 2 x its parameters per update
        at the aggregator)."""
        nbytes = self.model_bytes(variant)
        return Workload(nbytes, nbytes, self.flop_per_sample(variant),
                        self.aggregation_flop(variant, 1))


class RealTrainingSpec(_Strict):
    """Hyper-parameters of the real-training backend (federated averaging on a shipped dataset).

    The defaults are those the stored calibration curves were measured with; their one place
    (:class:`netsim.training.real.RealTrainingConfig` reads them)."""

    learning_rate: Annotated[float, _range("gt", 0, 1e3)] = 0.05
    batch_size: Annotated[int, Field(ge=1, le=1_000_000)] = 16
    local_epochs: Annotated[int, Field(ge=1, le=100)] = 2
    test_fraction: Annotated[float, Field(gt=0, lt=1)] = 0.2
    hidden_units: Annotated[int, Field(ge=1, le=4096)] = 64


def _batch_size(value: Any) -> Any:
    """``inf`` (text or float) is the whole local data: None."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return None
    if isinstance(value, float) and value == float("inf"):
        return None
    return value


BatchSize = Annotated[Annotated[int, Field(ge=1, le=10**9)] | None, BeforeValidator(_batch_size)]


class LabelBiasSpec(_Strict):
    """Async-HFL's "preference bias" split (Yu et al., IoTDI 2023, its ``load_data.py``
    ``BiasLoader``; the rule as netsim writes it is ours, netsim.training.labels): each
    device holds ``primary`` of its samples from one label, ``secondary`` from one other
    label drawn uniformly, and the rest (``1 - primary - secondary``) spread evenly over
    every label but the primary. ``primary_labels``: how each device's primary label is
    drawn: ``uniform`` (every label alike) or ``normal`` (the paper's
    ``label_distribution: normal``: label weights a logistic density over the labels in a
    random order, ``utils/dists.py`` ``normal``)."""

    primary: Annotated[float, Field(gt=0, le=1)]
    """Fraction of each device's samples from its primary label (0-1]."""
    secondary: Annotated[float, Field(ge=0, le=1)] = 0.0
    """Fraction from its secondary label [0-1); primary + secondary <= 1."""
    primary_labels: Literal["uniform", "normal"] = "uniform"

    @model_validator(mode="after")
    def _fractions(self) -> LabelBiasSpec:
        if self.primary + self.secondary > 1.0 + 1e-12:
            raise ValueError(f"primary ({self.primary:g}) + secondary ({self.secondary:g}) "
                             "is more than 1: they are fractions of each device's samples")
        return self


class TrainingSpec(_Strict):
    """Training goal and limits."""

    backend: Literal["surrogate", "real", "torch"] = "surrogate"
    target_loss: Annotated[float, PositiveF,
                           Field(json_schema_extra={"required_unless": "target_accuracy"})]
    """The loss that ends the run (nats); with ``target_accuracy`` instead, the equivalent
    loss by the model's accuracy map, filled in when the scenario is read."""
    target_accuracy: Annotated[float, Field(gt=0, lt=1)] | None = None
    """Test accuracy that ends the run, an alternative to ``target_loss`` (needs a model with
    an accuracy map): the run and every planner use its equivalent loss."""
    deadline_s: Annotated[Seconds, _range("gt", 0, 1e15)]
    max_epochs: Annotated[int, Field(ge=1, le=1_000_000)] = 200
    target_probability: Annotated[float, Field(gt=0, lt=1)] | None = None
    dirichlet_alpha: Annotated[float, PositiveF] | None = None
    """Label skew of the devices' data: each class's samples split over the devices by
    Dirichlet(alpha) (smaller: more skewed); None with no ``shards_per_device``: IID."""
    shards_per_device: Annotated[int, Field(ge=1, le=100_000)] | None = None
    """McMahan et al.'s pathological non-IID split: the data sorted by label, cut into
    ``shards_per_device`` shards per device, each device dealt that many (so it holds about
    that many classes); exclusive with ``dirichlet_alpha``; at most the model's classes."""
    label_bias: LabelBiasSpec | None = None
    """Async-HFL's preference-bias split (:class:`LabelBiasSpec`, e.g. ``{primary: 0.8,
    secondary: 0.2}``); exclusive with ``dirichlet_alpha`` and ``shards_per_device``."""
    truth_sample_efficiency: Annotated[float, Field(gt=0, le=10)] = 1.0
    memory_overhead: Annotated[float, Field(ge=1, le=100)] = 3.0
    local_epochs: Annotated[int, Field(ge=1, le=10_000)] = 1
    """E: passes each participant makes over the samples it uses in an epoch (its compute is E
    times theirs; its progress: netsim.training.loss, docs/curves.md)."""
    batch_size: BatchSize = None
    """B: local minibatch size in samples; None (or ``inf``): the whole local data, one step
    per pass."""
    real: RealTrainingSpec = Field(default_factory=RealTrainingSpec)

    @model_validator(mode="after")
    def _one_skew(self) -> TrainingSpec:
        given = [name for name in ("dirichlet_alpha", "shards_per_device", "label_bias")
                 if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"{' and '.join(given)} are {len(given)} ways to skew the "
                             "labels: give one of them")
        return self

    @property
    def label_skewed(self) -> bool:
        """Whether the devices' labels are skewed (Dirichlet, shards or label bias)."""
        return self.dirichlet_alpha is not None or self.shards_per_device is not None \
            or self.label_bias is not None


class GenerateSpec(_Strict):
    """A seeded heterogeneous edge network (see :mod:`netsim.scenario.generator`)."""

    n_devices: Annotated[int, Field(ge=1, le=10_000_000)]
    mix: dict[str, Annotated[float, NonNegativeF]] = Field(
        default_factory=lambda: {"phone": 0.5, "sbc": 0.2, "jetson": 0.15, "laptop": 0.15}
    )
    access: dict[str, Annotated[float, NonNegativeF]] = Field(
        default_factory=lambda: {"wifi": 0.5, "lte": 0.3, "5g": 0.2}
    )
    aggregator_class: str = "edge-server"
    devices_per_cell: Annotated[int, Field(ge=1, le=100_000)] = 32
    backhaul: str = "fibre"
    samples_mean: Annotated[float, _range("ge", 0, 1e9)] = 600.0
    samples_spread: Annotated[float, Field(ge=0, le=5)] = 0.5
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] | None = None
    shared_media: bool = True
    """Each generated wireless cell is a shared medium (docs/wireless.md); false keeps every
    device on a private link (netsim 0.3's networks)."""
    edges: GeneratedEdgesSpec | None = None
    """Edge aggregators on the generated cells (docs/hierarchical.md); absent: none."""


class GeneratedEdgesSpec(_Strict):
    """Edge aggregators of a generated network: one on every ``cells_per_edge``-th cell's node
    (its site), serving the devices of that cell and the next ``cells_per_edge - 1`` (netsim's
    generator, docs/hierarchical.md)."""

    cells_per_edge: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    """Cells per edge aggregator (consecutive cells in order of opening)."""
    edge_class: str = "edge-server"
    """The catalog's device class whose FLOP/s, memory and power the edges take."""
    backhaul_bps: Annotated[BitsPerSecond, _range("gt", 0, 1e18), _AT_LEAST_MIN_RATE] | None = None
    """Every cell's backhaul link to the core router (bit/s; absent: ``generate.backhaul``'s
    catalog figure): an edge's uplink to the cloud."""
    metro_bps: Annotated[BitsPerSecond, _range("gt", 0, 1e18), _AT_LEAST_MIN_RATE] | None = None
    """The core router's link to the aggregator (bit/s; absent: the catalog's fibre): the
    metro backhaul every edge shares."""


def _trace_given(spec: Any) -> Any:
    """A dynamics model ``trace`` names its file (availability and bandwidth alike)."""
    if spec.model == "trace" and not spec.trace:
        raise ValueError("model: trace needs a trace file (trace: PATH)")
    return spec


class AvailabilitySpec(_Strict):
    """Who is online when (netsim.dynamics.availability)."""

    model: Literal["bernoulli", "markov", "trace"] = "bernoulli"
    mean_online_s: Annotated[Seconds, _range("gt", 0, 1e12)] | None = None
    """markov: mean length of an online session (s); absent: the device class's figure in
    the generator's catalog (netsim/data/edge_catalog.yaml), 30 min for a device without one."""
    mean_offline_s: Annotated[Seconds, _range("gt", 0, 1e12)] | None = None
    """markov: mean length of an offline gap (s); absent: the device class's figure in the
    catalog, 2 h for a device without one."""
    diurnal_amplitude: Annotated[float, Field(ge=0, le=1)] = 0.0
    """markov: the odds of coming online follow a 24 h cycle with this relative amplitude,
    highest at the run's start (0 = flat)."""
    trace: str | None = None
    """trace: file of online intervals (columns device, start_s, end_s; CSV or Parquet),
    relative to the scenario file."""
    repeat: bool = True
    """trace: a trace shorter than the run repeats (else its last state holds)."""

    @model_validator(mode="after")
    def _has_trace(self) -> Any:
        return _trace_given(self)


class BandwidthSpec(_Strict):
    """Link capacity over time, per direction (netsim.dynamics.bandwidth)."""

    model: Literal["constant", "lognormal", "trace"] = "constant"
    sigma: Annotated[float, Field(ge=0, le=5)] = 0.3
    """lognormal: standard deviation of log capacity around the link's ``bandwidth_bps``."""
    correlation_s: Annotated[Seconds, _range("gt", 0, 1e12)] = 60.0
    """lognormal: AR(1) correlation time (s)."""
    step_s: Annotated[Seconds, _range("gt", 0, 1e12)] = 10.0
    """lognormal: length of one constant piece (s)."""
    trace: str | None = None
    """trace: file of capacities (columns a, b, time_s, bandwidth_bps; CSV or Parquet),
    relative to the scenario file."""
    repeat: bool = True
    """trace: a trace shorter than the run repeats (else its last value holds)."""

    @model_validator(mode="after")
    def _has_trace(self) -> Any:
        return _trace_given(self)


class ComputeSpec(_Strict):
    """Device speed per epoch (netsim.dynamics.world)."""

    spread: Annotated[float, Field(ge=0, le=5)] = 0.0
    """sigma of a log-normal factor (median 1) on ``flop_per_s``, drawn per device-epoch."""
    straggler_probability: Annotated[float, Field(ge=0, le=1)] = 0.0
    """chance that a device-epoch runs ``straggler_slowdown`` times slower."""
    straggler_slowdown: Annotated[float, Field(ge=1, le=1e6)] = 5.0


class DynamicsSpec(_Strict):
    """A world that changes over time (docs/dynamics.md); absent: the static world."""

    availability: AvailabilitySpec = Field(default_factory=AvailabilitySpec)
    bandwidth: BandwidthSpec = Field(default_factory=BandwidthSpec)
    compute: ComputeSpec = Field(default_factory=ComputeSpec)


def _model_form(value: Any) -> str | None:
    """Which form a scenario's ``model`` takes: a built-in name, a model by its figures, or
    the PyTorch model itself (a mapping with ``torch`` and without ``params``)."""
    if isinstance(value, str):
        return "str"
    if isinstance(value, TorchModelSpec) or (isinstance(value, dict) and "torch" in value
                                             and "params" not in value):
        return "TorchModelSpec"
    return "ModelSpec" if isinstance(value, dict | ModelSpec) else None


ModelField = Annotated[Annotated[str, Tag("str")] | Annotated[ModelSpec, Tag("ModelSpec")]
                       | Annotated[TorchModelSpec, Tag("TorchModelSpec")],
                       Discriminator(_model_form, custom_error_type="model_form",
                                     custom_error_message="expected a built-in model name, a "
                                     "model spec (params, train_flop_per_sample, ...) or the "
                                     "PyTorch model ({torch: {factory: ..., input_shape: "
                                     "...}})")]


class Scenario(_Strict):
    """A whole scenario: network (explicit or generated), model, training goal, policy params."""

    name: str = "scenario"
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0
    devices: tuple[DeviceSpec, ...] | None = None
    links: tuple[LinkSpec, ...] | None = None
    media: tuple[MediumSpec, ...] = ()
    """Shared media (wireless cells) that links join with ``links[].medium``."""
    generate: GenerateSpec | None = None
    aggregator: str | None = None
    model: ModelField
    training: TrainingSpec
    policies: dict[str, dict[str, Any]] = Field(default_factory=dict)
    dynamics: DynamicsSpec | None = None
    edges: tuple[EdgeSpec, ...] = ()
    """Edge aggregators between devices and the cloud aggregator (docs/hierarchical.md)."""
    record_phase_times: bool = False
    """Keep each participant's phase times in the devices table (``phase_times_s``: per
    epoch its download start and end, training start and end, upload start and end), for
    static star epochs (the arrays and the events alike); off by default, since a fleet's
    every epoch would add a row per participant."""
    goodput_factor: Annotated[float, Field(gt=0, le=1)] = 1.0
    """The share of every link's ``bandwidth_bps`` that carries payload, where a link does
    not say (``links[].goodput_factor``; a generated network's links all take this): 1, the
    bandwidths are payload rates (netsim's reading before 0.7.0); 0.956 reads them as
    Ethernet line rates under TCP (netsim.network.goodput, docs/semantics.md)."""

    @field_serializer("devices", "links", mode="wrap")
    def _sequences_as_tuples(self, value: Any, handler: SerializerFunctionWrapHandler,
                             info: SerializationInfo) -> Any:
        """A resolved generated fleet holds its devices and links as lazy sequences
        (netsim.scenario.fleet): serialised as the tuples they stand for."""
        if value is not None and not isinstance(value, tuple):
            value = tuple(value)
        return handler(value)

    @model_validator(mode="after")
    def _network_given_once(self) -> Scenario:
        explicit = self.devices is not None or self.links is not None
        if explicit and self.generate is not None:
            raise ValueError("give either devices/links or generate, not both")
        if not explicit and self.generate is None:
            raise ValueError("a scenario needs devices and links, or generate")
        if explicit and (not self.devices or self.links is None):
            raise ValueError("devices (at least one) and links must both be given")
        return self


LossParams.model_rebuild()
GenerateSpec.model_rebuild()
