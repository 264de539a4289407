"""The offline bundle: one signed file that carries everything across the air gap.

A bundle is an uncompressed POSIX tar: ``manifest.json`` first,
``manifest.json.minisig`` second (Ed25519, minisign format, so a stock
``minisign -V`` checks it), then the payload members the manifest lists with
their lengths and sha256 digests.  ``docs/bundle.md`` specifies the format
fully, for third-party verifiers.

The public surface, modelled on python-tuf's ngclient (a few names, length
and hash caps, monotonic versions, thresholds), is what the installer uses:

* keys and trust: ``SecretKey``, ``PublicKey``, ``TrustPolicy``,
  ``make_rotation``, ``rotate_trust``;
* ``build_bundle(spec, out, keys)``; ``build_project_wheel(project, out)``: the agent's
  wheel from a clean copy of its source (what ``[agent] project`` builds);
* ``gather(site, out, keys)`` / ``load_site`` / ``SiteSpec`` / ``GatherResult``: resolve
  the target's wheels, hash the models, build image and installer, then build (the
  connected side);
* ``ModelKit``: what a build with a model needs of the model code (presets, the vLLM
  command, the OpenSSF model signature), handed in by ``abhed bundle``
  (``models.bundle_kit.BUNDLE_KIT``): ``bundle`` never imports ``models``, so the frozen
  installer carries none;
* ``verify_bundle(path, trust, installed_version=, allow_downgrade=, stage_to=)``
  returning a ``VerifiedBundle`` (signature first, then one streaming pass;
  nothing written outside the staging directory, which is removed on failure);
* ``inspect_bundle`` / ``BundleInfo`` and ``diff_bundles`` / ``BundleDiff``
  (no unpacking); ``diff_settings`` (the site's agent settings, line by line) and
  ``comparable_settings`` (a bundle's settings with its release directory as ``{release}``);
* the site's agent settings (``site/settings.json``, ``SiteInfo`` in the manifest):
  ``SettingsCheck`` (the agent's schema, handed in by ``abhed bundle``),
  ``release_paths`` (the paths they name inside the release, for the installer),
  ``expand_settings`` and ``settings_bytes`` (their placeholders and their one byte form);
* ``split_bundle`` / ``join_volumes`` / ``JoinResult`` for removable media;
* ``open_regular`` / ``read_regular``: open an operator-named path only if it
  is a regular file, never blocking on a FIFO (the installer uses them too);
* ``Manifest`` and ``Member`` (``staged_name`` says where a member unpacks;
  ``Manifest.for_role`` what one host role installs); ``ROLE_NAMES`` and
  ``endpoint_address`` (a model endpoint URL's host and port): hosts by role;
* the errors::

    BundleError
    ├── FormatError
    │   └── UnsafeMember
    ├── SignatureError
    ├── DigestMismatch
    ├── RollbackRefused
    ├── VolumeError
    ├── SpecError
    └── StagingError

This package imports nothing from ``appliance`` and nothing heavy (zstandard
loads only to compress or unpack), so the installer can be frozen without the
agent.
"""

from __future__ import annotations

from ._build import build_bundle, build_project_wheel
from ._errors import (
                      BundleError,
                      DigestMismatch,
                      FormatError,
                      RollbackRefused,
                      SignatureError,
                      SpecError,
                      StagingError,
                      UnsafeMember,
                      VolumeError,
)
from ._gather import GatherResult, default_cache, gather
from ._inspect import (
    BundleDiff,
    BundleInfo,
    comparable_settings,
    diff_bundles,
    diff_settings,
    inspect_bundle,
)
from ._manifest import Manifest, Member, SiteInfo, staged_name
from ._minisign import PublicKey, SecretKey
from ._model_kit import ModelKit
from ._regular import open_regular, read_regular
from ._roles import ROLE_NAMES, endpoint_address
from ._settings import SettingsCheck, expand_settings, release_paths, settings_bytes
from ._site_spec import SiteSpec, load_site
from ._trust import TrustPolicy, make_rotation, rotate_trust
from ._verify import VerifiedBundle, verify_bundle
from ._volumes import JoinResult, join_volumes, split_bundle

__all__ = [
    "BundleDiff",
    "BundleError",
    "BundleInfo",
    "DigestMismatch",
    "FormatError",
    "GatherResult",
    "JoinResult",
    "Manifest",
    "Member",
    "ModelKit",
    "PublicKey",
    "ROLE_NAMES",
    "RollbackRefused",
    "SecretKey",
    "SettingsCheck",
    "SignatureError",
    "SiteInfo",
    "SiteSpec",
    "SpecError",
    "StagingError",
    "TrustPolicy",
    "UnsafeMember",
    "VerifiedBundle",
    "VolumeError",
    "build_bundle",
    "build_project_wheel",
    "comparable_settings",
    "default_cache",
    "diff_bundles",
    "diff_settings",
    "endpoint_address",
    "expand_settings",
    "gather",
    "inspect_bundle",
    "join_volumes",
    "load_site",
    "make_rotation",
    "open_regular",
    "read_regular",
    "release_paths",
    "rotate_trust",
    "settings_bytes",
    "split_bundle",
    "staged_name",
    "verify_bundle",
]
