"""``abhed catalog ...``: write model-catalog entries from the model-family presets.

``abhed catalog add DIR --family F`` hashes every file under DIR and writes an
entry with the family's tool-call and reasoning parsers, context, dtype,
sampling list and vLLM flags (``models.PRESETS``; docs/models.md lists them with
their sources).  An unknown family is refused with the list.  The context
length is bounded by the model's own ``config.json`` (``models.model_context_limit``):
the family's default is capped to it, with a note; a ``--max-model-len`` over
it is refused.  The catalog file
is replaced atomically, so a reader never sees half an entry.

Exit codes: 0 done, 1 refused (the message says why), 2 usage error.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from cli._common import config_option, get_config

__all__ = ["catalog"]


def _catalog_path(explicit: Path | None, config_path: Path | None) -> Path:
    if explicit is not None:
        return explicit
    from appliance import abhed_home

    config = get_config(config_path)
    return Path(config.catalog).expanduser() if config.catalog else abhed_home() / "catalog.json"


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@click.group()
def catalog() -> None:
    """Write model-catalog entries from the model-family presets."""


@catalog.command("families")
@click.option("--json", "as_json", is_flag=True, help="Print the presets as JSON.")
def families(as_json: bool) -> None:
    """List the model families ``catalog add --family`` knows."""
    import dataclasses

    from models import PRESETS

    if as_json:
        click.echo(json.dumps([dataclasses.asdict(p) for p in PRESETS], indent=2))
        return
    for p in PRESETS:
        think = f", reasoning {p.reasoning_parser}" if p.reasoning_parser else ""
        click.echo(f"{p.family:14} tools {p.tool_call_parser}{think}, context "
                   f"{p.default_context} (max {p.max_context}): {p.summary}")


@catalog.command("add")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--family", required=True, help="Model family (see `abhed catalog families`).")
@click.option("--name", default=None, help="Entry name (default: from the directory's name).")
@click.option("--served-name", default=None, help="The name clients send (default: --name).")
@click.option("--max-model-len", type=click.IntRange(64, 10_000_000), default=None,
              help="Context length (default: the family's).")
@click.option("--gpu-gib", type=click.FloatRange(min=1, max=100_000), default=None,
              help="Memory per GPU; picks the family's suggested tensor-parallel size.")
@click.option("--tensor-parallel-size", "tp", type=click.IntRange(1, 64), default=None)
@click.option("--catalog", "catalog_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Catalog file (default: config 'catalog' or ABHED_HOME/catalog.json).")
@click.option("--replace", is_flag=True, help="Replace an entry of the same name.")
@config_option
def add(directory: Path, family: str, name: str | None, served_name: str | None,
        max_model_len: int | None, gpu_gib: float | None, tp: int | None,
        catalog_path: Path | None, replace: bool, config_path: Path | None) -> None:
    """Hash the model in DIRECTORY and add its catalog entry from the family's preset."""
    from models import ModelsError, entry_from_preset, get_preset, load_catalog, model_context_limit

    path = _catalog_path(catalog_path, config_path)
    try:
        current = load_catalog(path)
        entry = entry_from_preset(directory, family, name=name, served_name=served_name,
                                  max_model_len=max_model_len, gpu_gib=gpu_gib,
                                  tensor_parallel_size=tp)
    except ModelsError as exc:
        click.echo(f"refused: {exc}", err=True)
        sys.exit(1)
    others = [m for m in current.models if m.name != entry.name]
    if len(others) != len(current.models) and not replace:
        click.echo(f"refused: {path} already has an entry named {entry.name!r}; pass --replace "
                   "or --name", err=True)
        sys.exit(1)
    models = [m.model_dump(mode="json") for m in others] + [entry.model_dump(mode="json")]
    try:
        _write_atomic(path, {"models": models})
    except OSError as exc:
        click.echo(f"refused: cannot write {path}: {exc.strerror}", err=True)
        sys.exit(1)
    click.echo(f"added {entry.name} ({family}: tool parser {entry.tool_call_parser}, "
               f"{len(entry.files)} files hashed, max_model_len {entry.max_model_len}, "
               f"tensor_parallel_size {entry.tensor_parallel_size}) to {path}")
    default = get_preset(family).default_context
    limit = model_context_limit(directory)
    if max_model_len is None and limit is not None and entry.max_model_len < default:
        click.echo(f"note: max_model_len is {entry.max_model_len}, not the {family} family's "
                   f"{default}: capped to the model's own limit ({limit.source})", err=True)
