"""What every Abhed package stands on, and which stands on nothing of ours.

Small mechanisms that each package needed and had written for itself (four
copies of ending a process group, six of hashing a file, two of opening only
a regular file, seven loaders of config-like files each with its own errors):
one of each, here, in the one package every other may import.  It imports no
other Abhed package, and nothing heavier than pydantic (imported only where a
document is validated), so the frozen installer carries it too.

Public surface:

* the strict loader (:func:`load_document`, :func:`parse_document`,
  :func:`validate_document`, :func:`read_document` (read and parsed, not yet
  validated), :func:`parse_json_list` (a JSON array at the top), and
  :func:`load_if_present` for a record a program keeps, which may not exist yet):
  every JSON or TOML file of ours is read once, parsed once,
  every problem reported with its location (see ``foundation._documents``);
* regular files (:func:`open_regular`, :func:`read_regular`,
  :func:`open_regular_fd`): never block on a FIFO, refuse devices, cap sizes;
* :func:`digest_file` (SHA-256 and size, streamed);
* :func:`terminate_group` (SIGTERM, grace, SIGKILL, stragglers), :func:`die_with_parent`
  (a child that ends when its parent is killed) and
  :data:`OFFLINE_ENV` (what keeps a child from reaching a hub); :func:`usable_cpus`
  (the CPUs this process may run on, for a worker pool);
* :func:`is_within` (a path inside a root, compared as written) and :class:`under`
  (a class attribute naming a fixed path beneath a root the instance holds);
* the vLLM router's command (:func:`router_argv`, :data:`ROUTER_MODULE`,
  :data:`ROUTER_PORT`), what a replica's URL may be (:func:`replica_root`) and any URL a
  site names for its model service (:func:`service_url`), for ``abhed serve``, the
  site spec and the installer's unit alike;
* the hash-chain rule both tamper-evident logs follow (:func:`link_hash`,
  :func:`link_problem`, :func:`canonical`, :data:`GENESIS`);
* the policy modes: :data:`Mode`, :data:`MODES` (strictest first),
  :func:`stricter_or_equal`, :func:`modes_no_looser`, :func:`as_mode`;
* the errors, and :func:`reraised_as`, which tells one in a package's own error
  class with the same words::

    FoundationError
    ├── FileRefused
    │   ├── FileMissing
    │   └── NotRegularFile
    └── DocumentError      (its Problems: where, message)
"""

from __future__ import annotations

from foundation._chain import GENESIS, canonical, link_hash, link_problem
from foundation._digest import FileDigest, digest_file
from foundation._documents import (
    Syntax,
    load_document,
    load_if_present,
    parse_document,
    parse_json_list,
    read_document,
    validate_document,
)
from foundation._errors import (
    DocumentError,
    FileMissing,
    FileRefused,
    FoundationError,
    Problem,
    reraised_as,
)
from foundation._modes import MODES, Mode, as_mode, modes_no_looser, stricter_or_equal
from foundation._paths import is_within, under
from foundation._process import OFFLINE_ENV, die_with_parent, terminate_group, usable_cpus
from foundation._regular import NotRegularFile, open_regular, open_regular_fd, read_regular
from foundation._router import ROUTER_MODULE, ROUTER_PORT, replica_root, router_argv, service_url

__all__ = [
    "GENESIS",
    "MODES",
    "OFFLINE_ENV",
    "ROUTER_MODULE",
    "ROUTER_PORT",
    "DocumentError",
    "FileDigest",
    "FileMissing",
    "FileRefused",
    "FoundationError",
    "Mode",
    "NotRegularFile",
    "Problem",
    "Syntax",
    "as_mode",
    "die_with_parent",
    "digest_file",
    "canonical",
    "is_within",
    "link_hash",
    "link_problem",
    "load_document",
    "load_if_present",
    "modes_no_looser",
    "open_regular",
    "open_regular_fd",
    "parse_document",
    "parse_json_list",
    "read_document",
    "read_regular",
    "replica_root",
    "reraised_as",
    "router_argv",
    "service_url",
    "stricter_or_equal",
    "terminate_group",
    "under",
    "usable_cpus",
    "validate_document",
]
