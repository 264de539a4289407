"""``install BUNDLE``: the first install on a host (see ``installer._deploy``)."""

from __future__ import annotations

import argparse

from .._deploy import DeployOptions, deploy


def options(args: argparse.Namespace) -> DeployOptions:
    return DeployOptions(bundle=args.bundle, prefix=args.prefix, trust=tuple(args.trust),
                         threshold=args.threshold, allow_downgrade=args.allow_downgrade,
                         python=args.python, skip_gate=args.skip_gate,
                         accept_probe_failure=args.accept_probe_failure,
                         host_link=args.host_link, bin_link=args.bin_link,
                         drop_site_layer=args.drop_site_layer,
                         drop_local_settings=getattr(args, "drop_local_settings", False),
                         role=args.role, switch_role=args.switch_role)


def run(args: argparse.Namespace) -> int:
    return deploy(options(args), "install")
