"""Sequence containers: accepted input forms, batching, encoding and scaling."""

from ._batching import (
    BucketBatchLoader,
    FlatSequences,
    SequenceDataset,
    balanced_batches,
    bucket_batches,
)
from ._encoding import InputEncoder
from ._long import from_long_format, to_long_format
from ._scaler import SequenceStandardScaler
from ._validation import (
    check_float32_range,
    check_sequences,
    input_layout,
    restore_layout,
    sequence_column,
)

__all__ = [
    "BucketBatchLoader",
    "FlatSequences",
    "InputEncoder",
    "SequenceDataset",
    "SequenceStandardScaler",
    "balanced_batches",
    "bucket_batches",
    "check_float32_range",
    "check_sequences",
    "from_long_format",
    "input_layout",
    "restore_layout",
    "sequence_column",
    "to_long_format",
]
