#!/usr/bin/env bash
# One-time preparation for the kernel-tree cells of the grep benchmark (not CI,
# not scripts/setup): installs Debian's linux-source-6.1 and unpacks its
# tarball under ~/.cache/abhed-bench/grep/linux (or $ABHED_BENCH_CACHE/linux),
# outside the repository.  Needs root or sudo.
#
# Debian appends a block to the tree's top-level .gitignore ("ignore everything
# at the top level", i.e. '/*' then '!/debian/') that only makes sense in its
# packaging repository.  grep applies .gitignore files outside git too, so with
# that block the tree would hold 0 searchable files; it is cut here so the tree
# is upstream's (about 78,500 files after upstream's own ignore rules).
#
#   benchmarks/grep/prepare-kernel.sh          # install + unpack (idempotent)
#   benchmarks/grep/prepare-kernel.sh --clean  # delete the unpacked tree
set -euo pipefail
dest="${ABHED_BENCH_CACHE:-$HOME/.cache/abhed-bench/grep}/linux"
if [[ ${1:-} == --clean ]]; then
    rm -rf -- "$dest"
    echo "removed $dest (the package stays installed: apt-get remove linux-source-6.1 to drop it)"
    exit 0
fi
if [[ -d $dest && -n $(ls -A "$dest" 2>/dev/null) ]]; then
    echo "already unpacked: $dest"
else
    sudo=""; [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends linux-source-6.1
    tarball=$(ls /usr/src/linux-source-6.1*.tar.* | head -1)
    mkdir -p "$dest"
    tar -xf "$tarball" -C "$dest" --strip-components=1
    echo "unpacked $(find "$dest" -type f | wc -l) files into $dest"
fi
sed -i '/^# Debian packaging: ignore everything at the top level/,$d' "$dest/.gitignore"
