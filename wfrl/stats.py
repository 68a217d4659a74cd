"""The mean and its standard error, the one way every evaluation, training log and table of wfrl
reports a sample of episode returns (or of paired differences)."""
from __future__ import annotations

import numpy as np


def standard_error(x) -> float:
    """The sample standard deviation (ddof=1) over sqrt(n); 0.0 for fewer than two values. The
    array is used as given (its dtype included): callers pass float64 where they sum float32."""
    x = np.asarray(x)
    return float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0


def mean_se(x) -> tuple[float, float]:
    """(mean, standard error) of a sample, in float64."""
    x = np.asarray(x, dtype=np.float64)
    return float(x.mean()), standard_error(x)
