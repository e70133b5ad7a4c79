#!/usr/bin/env bash
# Build one lab image from its recipe, offline from Docker Hub: debootstrap (bookworm minbase) from Debian's
# archive → `docker import` as a bootstrap image → run the recipe in a container of it → `docker export` |
# `docker import` with the recipe's CMD. Usage: build-image.sh <node|base> <build dir>
#
# Content-addressed: the tag is a hash of the recipe and of BUILD_FORMAT, so an unchanged recipe is never
# rebuilt (checked with `docker image inspect`). Writes <build dir>/<name>-image.tag; for the base image also
# <build dir>/base-image-<hash>.tar (`docker save`), which lab-up loads into every node's engine.
set -euo pipefail

NAME=${1:?usage: build-image.sh <node|base> <build dir>}
BUILD_DIR=${2:?usage: build-image.sh <node|base> <build dir>}
HERE=$(cd "$(dirname "$0")" && pwd)
RECIPE=$HERE/images/$NAME.sh
SUITE=${SPARK_LAB_SUITE:-bookworm}
MIRROR=${SPARK_LAB_MIRROR:-http://deb.debian.org/debian}
REPO=${SPARK_LAB_IMAGE_REPO:-sparkfleet-lab}
# Bump when a change here alters what gets built (suite, import options, CMD/ENV handling); edits that only
# touch logging or locking must not rebuild every image.
BUILD_FORMAT="1 $SUITE $MIRROR import:CMD,ENV=container=docker"

log() { echo "lab-image[$NAME]: $*" >&2; }

[[ -f $RECIPE ]] || { log "no recipe $RECIPE"; exit 2; }
mkdir -p "$BUILD_DIR"

recipe_hash() {
  { echo "$BUILD_FORMAT"; cat "$RECIPE"; } | sha256sum | cut -c1-12
}

bootstrap_image() {
  # The minbase rootfs only depends on suite, mirror and architecture; it is shared by every recipe.
  local key tag tarball root
  key=$(printf '%s %s %s minbase\n' "$SUITE" "$MIRROR" "$(dpkg --print-architecture)" | sha256sum | cut -c1-12)
  tag=$REPO/bootstrap:$SUITE-$key
  if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "$tag"; return 0
  fi
  tarball=$BUILD_DIR/debootstrap-$SUITE-$key.tar
  if [[ ! -s $tarball ]]; then
    command -v debootstrap >/dev/null || {
      log "installing debootstrap"
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    }
    root=$(mktemp -d "$BUILD_DIR/rootfs.XXXXXX")
    log "debootstrap --variant=minbase $SUITE from $MIRROR"
    debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$BUILD_DIR/debootstrap.log" 2>&1 || {
      tail -n 20 "$BUILD_DIR/debootstrap.log" >&2; rm -rf "$root"; return 1; }
    tar -C "$root" --numeric-owner -cf "$tarball.part" .
    mv "$tarball.part" "$tarball"
    rm -rf "$root"
  fi
  log "importing $tarball as $tag"
  docker import "$tarball" "$tag" >/dev/null
  echo "$tag"
}

image_cmd() {
  sed -n 's/^# image-cmd: //p' "$RECIPE" | head -n1
}

build() {
  local tag=$1 base container
  base=$(bootstrap_image)
  container=$REPO-build-$NAME-${tag##*:}
  docker rm -f "$container" >/dev/null 2>&1 || true
  log "running recipe $(basename "$RECIPE") in $base"
  # Labelled apart from the lab's objects: lab-up cleans sparkfleet.lab leftovers and must never remove a
  # build that runs concurrently.
  docker run -i --name "$container" --label sparkfleet.lab-build="$NAME" "$base" /bin/bash -s <"$RECIPE" || {
    docker rm -f "$container" >/dev/null; return 1; }
  log "exporting to $tag"
  docker export "$container" | docker import \
    --change "CMD $(image_cmd)" \
    --change 'ENV container=docker' \
    - "$tag" >/dev/null
  docker rm -f "$container" >/dev/null
}

save_archive() {
  # Archive for loading into the nodes' engines; named by the hash so a stale one is never reused.
  local tag=$1 archive
  archive=$BUILD_DIR/$NAME-image-${tag##*:}.tar
  if [[ ! -s $archive ]]; then
    log "docker save → $archive"
    docker save -o "$archive.part" "$tag"
    mv "$archive.part" "$archive"
  fi
  find "$BUILD_DIR" -maxdepth 1 -name "$NAME-image-*.tar" ! -name "$(basename "$archive")" -delete
}

main() {
  local tag start
  tag=$REPO/$NAME:$(recipe_hash)
  # One build per image at a time on this machine (several checkouts may share one engine); the cache
  # check below runs after the wait, so a build finished meanwhile is reused.
  exec 9>"$BUILD_DIR/$NAME-image.lock"
  flock -n 9 || { log "another build of $NAME holds the lock; waiting"; flock 9; }
  start=$(date +%s)
  if docker image inspect "$tag" >/dev/null 2>&1; then
    log "cached: $tag"
  else
    build "$tag"
    log "built $tag in $(($(date +%s) - start))s"
  fi
  [[ $NAME == node ]] || save_archive "$tag"
  # Renamed into place: scenarios running side by side read the tag while another one refreshes it.
  echo "$tag" >"$BUILD_DIR/$NAME-image.tag.part"
  mv "$BUILD_DIR/$NAME-image.tag.part" "$BUILD_DIR/$NAME-image.tag"
  echo "$tag"
}

main
