"""Node ids and message sizes: how a Flower message maps onto netsim's devices and bytes.

- A device's Flower node id is a stable 63-bit hash of its id (:func:`node_id`): the same
  device has the same node id in every run, whatever the order of the fleet.
- A message's bytes on the wire are its arrays' bytes (:func:`message_bytes`): each Array's
  elements x item size, summed over the message's ArrayRecords. Config and metric records,
  keys and serialization headers are left out (netsim's formalization: a few hundred bytes
  beside the tensors), so a round moving a model of P parameters of 4 bytes moves 4 P bytes,
  as netsim's own epochs do.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np


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
    """Elements of every array in a RecordDict's ArrayRecords."""
    return sum(int(math.prod(a.shape)) for rec in record_dict.array_records.values()
               for a in rec.values())


def message_bytes(record_dict: Any) -> int:
    """Bytes a message with content ``record_dict`` (a flwr RecordDict) moves: its arrays'."""
    return sum(array_bytes(a) for rec in record_dict.array_records.values()
               for a in rec.values())
