#!/bin/bash
# Lab test double: build a local APT repository of STAND-IN packages that carry the real names and versions of
# the pinned DGX OS kernel and NVIDIA driver packages, so the host roles install, hold, pin, regenerate GRUB and
# arm one-shot boots for real on the lab node. The packages contain dummy boot files and markers, never a kernel
# or a driver. Usage: build-standin-repo.sh <repo dir> <nvidia-uvm stand-in source dir>
# Versions come from the environment (the scenario passes the same pins the roles use).
set -euo pipefail

REPO=${1:?usage: build-standin-repo.sh <repo dir> <uvm source dir>}
UVM_SRC=${2:?usage: build-standin-repo.sh <repo dir> <uvm source dir>}
CANDIDATE=${STANDIN_CANDIDATE:-7.0.0-1019-nvidia-64k}
FALLBACK=${STANDIN_FALLBACK:-7.0.0-1019-nvidia}
KVER=${STANDIN_KERNEL_VERSION:-7.0.0-1019.19~24.04.2}
NVMOD_VER=${STANDIN_NVIDIA_MODULES_VERSION:-7.0.0-1019.19~24.04.2+1}
DRIVER=${STANDIN_DRIVER:-580.178.04}
DRIVER_PKG_VER=${STANDIN_DRIVER_PACKAGE_VERSION:-580.178.04-0ubuntu0.24.04.1}
# A second driver build, so the lab can show the driver role refusing an unpinned version.
DRIVER_ALT_PKG_VER=${STANDIN_DRIVER_ALT_PACKAGE_VERSION:-580.178.05-0ubuntu0.24.04.1}
BRANCH=${DRIVER%%.*}
ARCH=$(dpkg --print-architecture)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

log() { echo "standin-repo: $*" >&2; }

# pkg <name> <version> <depends or ""> <description>; files are staged in $WORK/<name>_<version>/root
stage() { echo "$WORK/$1_$2/root"; }

pkg() {
  local name=$1 version=$2 depends=$3 description=$4 dir
  dir=$WORK/$1_$2
  mkdir -p "$dir/root/DEBIAN" "$dir/root/usr/share/doc/$name"
  printf 'Lab stand-in of %s %s built by sparkfleet molecule/host. Not the real package.\n' "$name" "$version" \
    >"$dir/root/usr/share/doc/$name/STANDIN"
  {
    echo "Package: $name"
    echo "Version: $version"
    echo "Architecture: $ARCH"
    echo "Maintainer: sparkfleet lab <lab@sparkfleet.invalid>"
    [[ -n $depends ]] && echo "Depends: $depends"
    echo "Section: standin"
    echo "Priority: optional"
    echo "Description: STAND-IN for $name ($description)"
    echo " Lab test double: dummy files only."
  } >"$dir/root/DEBIAN/control"
  [[ -d $dir/root/DEBIAN ]] && find "$dir/root" -type d -exec chmod 0755 {} +
  dpkg-deb --root-owner-group -Zgzip --build "$dir/root" "$REPO/${name}_${version}_${ARCH}.deb" >/dev/null
}

kernel_set() {
  local rel=$1 page_config=$2 root
  root=$(stage "linux-modules-$rel" "$KVER")
  mkdir -p "$root/lib/modules/$rel/kernel"
  : >"$root/lib/modules/$rel/modules.order"
  : >"$root/lib/modules/$rel/modules.builtin"
  pkg "linux-modules-$rel" "$KVER" "" "kernel modules"

  root=$(stage "linux-image-$rel" "$KVER")
  mkdir -p "$root/boot"
  # grub's 10_linux lists /boot/vmlinuz-* files; the content only has to be a non-empty regular file.
  printf 'sparkfleet lab stand-in kernel image %s\n' "$rel" >"$root/boot/vmlinuz-$rel"
  printf 'CONFIG_LOCALVERSION="-%s"\n%s\n' "${rel#*-*-}" "$page_config" >"$root/boot/config-$rel"
  printf '0000000000000000 T _stext\n' >"$root/boot/System.map-$rel"
  pkg "linux-image-$rel" "$KVER" "linux-modules-$rel (= $KVER)" "kernel image"
}

headers_tools() {
  local rel=$1 root
  root=$(stage "linux-headers-$rel" "$KVER")
  mkdir -p "$root/usr/src/linux-headers-$rel/include/config" "$root/usr/src/linux-headers-$rel/include/generated" \
    "$root/lib/modules/$rel"
  printf '#define UTS_RELEASE "%s"\n' "$rel" >"$root/usr/src/linux-headers-$rel/include/generated/utsrelease.h"
  printf '# stand-in kernel build tree\nall:\n' >"$root/usr/src/linux-headers-$rel/Makefile"
  printf '%s\n' "$rel" >"$root/usr/src/linux-headers-$rel/include/config/kernel.release"
  printf 'CONFIG_ARM64_64K_PAGES=y\n' >"$root/usr/src/linux-headers-$rel/include/config/auto.conf"
  ln -s "/usr/src/linux-headers-$rel" "$root/lib/modules/$rel/build"
  pkg "linux-headers-$rel" "$KVER" "" "kernel headers"

  root=$(stage "linux-tools-$rel" "$KVER")
  mkdir -p "$root/usr/lib/linux-tools/$rel"
  printf '#!/bin/sh\necho "cpupower stand-in for %s"\n' "$rel" >"$root/usr/lib/linux-tools/$rel/cpupower"
  chmod 0755 "$root/usr/lib/linux-tools/$rel/cpupower"
  pkg "linux-tools-$rel" "$KVER" "" "kernel tools"
}

driver_set() {
  local version=$1 driver=$2 root
  root=$(stage "nvidia-kernel-source-$BRANCH-open" "$version")
  mkdir -p "$root/usr/src/nvidia-$driver"
  cp -r "$UVM_SRC/nvidia-uvm" "$root/usr/src/nvidia-$driver/"
  printf '#define UVM_STANDIN_DRIVER_VERSION "%s"\n' "$driver" >"$root/usr/src/nvidia-$driver/nvidia-uvm/standin-version.h"
  pkg "nvidia-kernel-source-$BRANCH-open" "$version" "" "NVIDIA kernel module source (stand-in nvidia-uvm)"
  pkg "nvidia-driver-$BRANCH-open" "$version" "nvidia-kernel-source-$BRANCH-open (= $version)" "NVIDIA driver metapackage"
}

mkdir -p "$REPO"
rm -f "$REPO"/*.deb
kernel_set "$FALLBACK" "# CONFIG_ARM64_64K_PAGES is not set"
kernel_set "$CANDIDATE" "CONFIG_ARM64_64K_PAGES=y"
headers_tools "$CANDIDATE"
pkg "linux-modules-nvidia-$BRANCH-open-$CANDIDATE" "$NVMOD_VER" "linux-modules-$CANDIDATE (= $KVER)" "precompiled NVIDIA modules"
driver_set "$DRIVER_PKG_VER" "$DRIVER"
driver_set "$DRIVER_ALT_PKG_VER" "${DRIVER_ALT_PKG_VER%%-*}"
# DGX OS ships this package to turn KMS off; host_baseline must purge it.
root=$(stage nvidia-drm-options-modeset0 1.0)
mkdir -p "$root/usr/lib/modprobe.d"
printf 'options nvidia-drm modeset=0\n' >"$root/usr/lib/modprobe.d/nvidia-drm-options-modeset0.conf"
pkg nvidia-drm-options-modeset0 1.0 "" "nvidia-drm modeset=0 option"

cd "$REPO"
apt-ftparchive packages . >Packages
apt-ftparchive release . >Release
log "$(grep -c '^Package:' Packages) stand-in packages in $REPO"
