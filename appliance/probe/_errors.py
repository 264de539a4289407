"""The probe's errors: one root, under the appliance's.

    AbhedError
    └── ProbeError        the probe could not run: cases unreadable, no provider,
                          a baseline report that is not a report

A model that fails the probe is not an error: that is a report with
``passed: false``.
"""

from __future__ import annotations

from appliance._errors import AbhedError

__all__ = ["ProbeError"]


class ProbeError(AbhedError):
    """The probe could not run; the message says what to fix."""
