#!/usr/bin/env bash
# One-time preparation for the kernel-tree cells of the grep benchmark (not CI,
# not scripts/setup): installs Debian's linux-source-6.1 and unpacks its
# tarball under ~/.cache/abhed-bench/grep/linux (or $ABHED_BENCH_CACHE/linux),
# outside the repository.  Needs root or sudo.
set -euo pipefail
dest="${ABHED_BENCH_CACHE:-$HOME/.cache/abhed-bench/grep}/linux"
[[ -d $dest && -n $(ls -A "$dest" 2>/dev/null) ]] && { echo "already unpacked: $dest"; exit 0; }
sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends linux-source-6.1
tarball=$(ls /usr/src/linux-source-6.1*.tar.* | head -1)
mkdir -p "$dest"
tar -xf "$tarball" -C "$dest" --strip-components=1
echo "unpacked $(find "$dest" -type f | wc -l) files into $dest"
