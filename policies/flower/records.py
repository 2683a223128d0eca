"""Node ids and message sizes: how a Flower message maps onto netsim's devices and bytes.

- A device's Flower node id is a stable 63-bit hash of its id (:func:`node_id`): the same
  device has the same node id in every run, whatever the order of the fleet.
- A message's bytes on the wire are its records' values (:func:`message_bytes`, netsim's
  formalization, docs/flower.md):

  - an ArrayRecord: each Array's elements x item size (its serialized data's length where
    its dtype is no numpy one);
  - a MetricRecord: 8 bytes a value (an int or a float), each element of a list counted;
  - a ConfigRecord: 8 bytes an int or a float, 1 a bool, a text's UTF-8 length, a bytes
    value's length, each element of a list counted.

  Keys, dtypes, shapes and serialization headers are left out (a few bytes a record), so a
  model of P float32 parameters moves 4 P bytes plus its config's or metrics' values. An
  error reply moves 8 bytes (its code) and its reason's UTF-8 length (:func:`reply_bytes`).
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np

#: Bytes of an int or float value of a metric or config record, and of an error's code.
NUMBER_BYTES = 8


def node_id(device_id: str) -> int:
    """The Flower node id of device ``device_id``: the first 8 bytes of its BLAKE2b digest,
    as a positive 63-bit integer (never 0 or 1, the ids Flower reserves)."""
    digest = hashlib.blake2b(device_id.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "big") >> 1
    return value if value > 1 else value + 2


def array_bytes(array: Any) -> int:
    """Bytes of one Flower Array's values (elements x item size; its serialized data's length
    where its dtype is not a numpy one)."""
    try:
        itemsize = np.dtype(array.dtype).itemsize
    except TypeError:
        return len(array.data)
    return int(math.prod(array.shape)) * itemsize


def array_elements(record_dict: Any) -> int:
    """Elements of every array in a RecordDict's ArrayRecords (:func:`elements`)."""
    return sum(elements(a) for rec in record_dict.array_records.values() for a in rec.values())


def elements(array: Any) -> int:
    """Elements of one Flower Array: its shape's product, or where its dtype is no numpy one
    (a legacy Parameters tensor: ``.npy`` bytes, dtype '' and shape ()), its decoded
    array's size (1 where it does not decode)."""
    try:
        np.dtype(array.dtype)
    except TypeError:
        try:
            return int(np.asarray(array.numpy()).size)
        except Exception:  # noqa: BLE001 (bytes of another serialization)
            return 1
    return int(math.prod(array.shape))


def value_bytes(value: Any) -> int:
    """Bytes of one metric or config value (module docstring): 8 an int or float, 1 a bool,
    a text's UTF-8 length, a bytes value's length; a list, the sum of its elements'."""
    if isinstance(value, bool):
        return 1
    if isinstance(value, int | float | np.number):
        return NUMBER_BYTES
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, list | tuple):
        return sum(value_bytes(v) for v in value)
    raise TypeError(f"a record value of type {type(value).__name__} (Flower's records hold "
                    "numbers, bools, texts, bytes and lists of those)")


def message_bytes(record_dict: Any) -> int:
    """Bytes a message with content ``record_dict`` (a flwr RecordDict) moves: its arrays',
    metrics' and configs' values (module docstring)."""
    arrays = sum(array_bytes(a) for rec in record_dict.array_records.values()
                 for a in rec.values())
    values = sum(value_bytes(v) for records in (record_dict.metric_records,
                                                record_dict.config_records)
                 for rec in records.values() for v in rec.values())
    return arrays + values


def reply_bytes(message: Any) -> int:
    """Bytes a reply moves: its content's (:func:`message_bytes`), or an error reply's code
    and reason."""
    if message.has_error():
        return NUMBER_BYTES + len((message.error.reason or "").encode())
    return message_bytes(message.content)


def metric_names(record_dict: Any) -> set[str]:
    """The names of every metric in a RecordDict's MetricRecords."""
    return {name for rec in record_dict.metric_records.values() for name in rec}
