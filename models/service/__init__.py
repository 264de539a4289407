"""The site's model service: the relay on every engineer's host and the front on every model host.

Public surface: the relay (:class:`ModelRelay`, :class:`RelaySettings`), which
attributes each request to the Unix user who sent it and carries it over the
site's TLS, and the front (:class:`ModelFront`, :class:`FrontSettings`), which
checks the model hosts behind it, records every request and forwards it to vLLM;
docs/model-service.md.

A subpackage of ``models`` that ``models/__init__`` does not import: only
``abhed model-relay`` and ``abhed model-front`` run these servers, so an agent
that imports ``models`` for its provider and settings (every ``abhed tool``
call) does not load them (docs/performance.md, "Fifth pass").  Their errors are
``models``' own (``models.ServeError``, ``models.HostMismatch``).
"""

from __future__ import annotations

from models.service._front import FrontSettings, ModelFront
from models.service._relay import ModelRelay, RelaySettings

__all__ = ["FrontSettings", "ModelFront", "ModelRelay", "RelaySettings"]
