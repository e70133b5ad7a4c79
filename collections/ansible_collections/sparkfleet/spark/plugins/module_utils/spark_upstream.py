"""Reproducible upstream source trees: pinned commit + ordered patch series applied with `git am`.

A lock entry names an upstream (repository, exact commit), an ordered list of patch files, the patch-set
fingerprint and the tree id the patched source must have. `prepare` makes a work directory hold exactly that
tree, or fails naming the upstream and both ids. The commit ids it produces are reproducible too: the
committer name and e-mail are fixed, the committer date is the patch's author date
(`--committer-date-is-author-date`, as the reference does) and the user's and system's git configuration
are shut out, so two builders produce byte-identical commits from the same lock.

Pure parts (validation, the patch-set fingerprint, the stamp) are separate from `GitIO`, the only place that
runs git. Definitions are documented in docs/image-and-model.md.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.sparkfleet.spark.plugins.module_utils.spark_files import atomic_write_text, feed_file

RunResult = Tuple[int, str, str]
# run(argv, cwd, env_update) -> (rc, stdout, stderr); argv is always a list, never a shell string.
Runner = Callable[[List[str], Optional[str], Dict[str, str]], RunResult]

OBJECT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
STAMP_NAME = "sparkfleet-upstream.json"

# Settings that would otherwise let the builder's own git configuration change the resulting commits.
GIT_ISOLATION = [
    "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "-c", "am.threeWay=false",
    "-c", "am.keepcr=false", "-c", "am.messageId=false", "-c", "core.autocrlf=false",
    "-c", "i18n.commitEncoding=UTF-8", "-c", "init.defaultBranch=spark-build", "-c", "advice.detachedHead=false",
]


class UpstreamError(Exception):
    """A lock entry is invalid or the prepared tree does not match it; the message names the upstream."""


@dataclass(frozen=True)
class LockEntry:
    name: str
    repository: str
    commit: str
    patches: Tuple[str, ...]
    patchset_sha256: Optional[str]
    tree: Optional[str]
    head: Optional[str] = None


@dataclass
class Outcome:
    name: str
    dest: str
    commit: str
    patchset_sha256: str
    tree: Optional[str]
    head: Optional[str]
    changed: bool
    actions: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)

    def as_dict(self) -> Dict[str, Any]:
        return {
            "name": self.name, "dest": self.dest, "commit": self.commit, "patchset_sha256": self.patchset_sha256,
            "tree": self.tree, "head": self.head, "changed": self.changed, "actions": list(self.actions),
        }


# --- Pure: validation -------------------------------------------------------------------------

def _is_remote(repository: str) -> bool:
    """URLs (`scheme://`) and scp-like `host:path` are remote; everything else is a local path."""
    if "://" in repository:
        return True
    head = repository.split("/", 1)[0]
    return ":" in head


def validate_entry(raw: Mapping[str, Any], patch_dir: Optional[str], require_pins: bool) -> LockEntry:
    """Check one lock entry before anything is touched; every message names the upstream and the field."""
    name = str(raw.get("name") or "")
    if not NAME.match(name):
        raise UpstreamError(f"lock entry name {name!r}: expected lower-case letters, digits, '.', '_' or '-'")
    repository = str(raw.get("repository") or "")
    if not repository:
        raise UpstreamError(f"upstream {name}: field 'repository' is empty")
    if repository.startswith("-"):
        raise UpstreamError(f"upstream {name}: repository {repository!r} starts with '-' (it would be read as a "
                            "git option)")
    if not _is_remote(repository) and not os.path.isabs(repository):
        raise UpstreamError(f"upstream {name}: repository {repository!r} is a relative path; give an absolute "
                            "path or a URL (file://, https://, ssh://)")
    commit = _object_id(name, "commit", raw.get("commit"), required=True)
    patches = tuple(resolve_patch(name, str(p), patch_dir) for p in (raw.get("patches") or []))
    patchset = raw.get("patchset_sha256") or None
    if patchset is not None and not SHA256_HEX.match(str(patchset)):
        raise UpstreamError(f"upstream {name}: field 'patchset_sha256' must be 64 lower-case hex digits, "
                            f"got {patchset!r}")
    tree = _object_id(name, "tree", raw.get("tree"), required=False)
    head = _object_id(name, "head", raw.get("head"), required=False)
    if require_pins and (patchset is None or tree is None):
        missing = [f for f, v in (("patchset_sha256", patchset), ("tree", tree)) if v is None]
        raise UpstreamError(f"upstream {name}: the lock entry has no {' and no '.join(missing)}; pins are required "
                            "(run with require_pins=false once to learn the values, then record them)")
    return LockEntry(name, repository, commit, patches, patchset, tree, head)


def _object_id(name: str, fieldname: str, value: Any, required: bool) -> Optional[str]:
    if value in (None, ""):
        if required:
            raise UpstreamError(f"upstream {name}: field '{fieldname}' is empty")
        return None
    text = str(value)
    if not OBJECT_ID.match(text):
        raise UpstreamError(f"upstream {name}: field '{fieldname}' must be a full 40- or 64-digit lower-case hex "
                            f"object id, got {text!r}")
    return text


def resolve_patch(name: str, patch: str, patch_dir: Optional[str]) -> str:
    if os.path.isabs(patch):
        return patch
    if not patch_dir:
        raise UpstreamError(f"upstream {name}: patch {patch!r} is relative but no patch_dir was given")
    return os.path.join(patch_dir, patch)


# --- Pure: fingerprints and stamp ------------------------------------------------------------

def patchset_sha256(patches: Sequence[str]) -> str:
    """sha256 over, for each patch in series order: `<basename>\\n<size in bytes>\\n<bytes>`.

    Names and sizes are framed so that renaming, reordering or moving bytes between two patches all change
    the fingerprint; an empty series hashes the empty string. Streams each file in 1 MiB chunks.
    Shell equivalent: `for p in $SERIES; do printf '%s\\n%s\\n' "$(basename $p)" "$(stat -c %s $p)"; cat $p;
    done | sha256sum`.
    """
    digest = hashlib.sha256()
    for path in patches:
        digest.update(f"{os.path.basename(path)}\n{os.path.getsize(path)}\n".encode("utf-8"))
        feed_file(digest, path)
    return digest.hexdigest()


def check_patch_files(entry: LockEntry) -> None:
    missing = [p for p in entry.patches if not os.path.isfile(p)]
    if missing:
        raise UpstreamError(f"upstream {entry.name}: patch file(s) missing: {', '.join(missing)}")


def stamp_record(entry: LockEntry, patchset: str, head: str, tree: str) -> Dict[str, str]:
    return {"name": entry.name, "repository": entry.repository, "commit": entry.commit,
            "patchset_sha256": patchset, "head": head, "tree": tree}


def stamp_matches(stamp: Optional[Mapping[str, Any]], entry: LockEntry, patchset: str) -> bool:
    """The stamp describes the wanted state (the live HEAD and cleanliness are checked separately)."""
    if not stamp:
        return False
    wanted = {"commit": entry.commit, "patchset_sha256": patchset}
    if entry.tree:
        wanted["tree"] = entry.tree
    if entry.head:
        wanted["head"] = entry.head
    return all(stamp.get(key) == value for key, value in wanted.items())


def mismatch_message(entry: LockEntry, tree: str, head: str) -> Optional[str]:
    if entry.tree and tree != entry.tree:
        return (f"upstream {entry.name}: patched tree {tree} differs from the lock's tree {entry.tree} "
                f"(commit {entry.commit}, {len(entry.patches)} patch(es))")
    if entry.head and head != entry.head:
        return (f"upstream {entry.name}: patched HEAD {head} differs from the lock's head {entry.head} "
                f"(tree {tree} matches; the committer identity or patch metadata differ)")
    return None


# --- I/O: git ----------------------------------------------------------------------------------

class GitIO:
    """Runs git in one work directory with an isolated configuration and a fixed committer."""

    def __init__(self, run: Runner, git: str, dest: str, committer_name: str, committer_email: str) -> None:
        self.run = run
        self.git = git
        self.dest = os.path.abspath(dest)
        self.env = {
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
            "GIT_COMMITTER_NAME": committer_name, "GIT_COMMITTER_EMAIL": committer_email,
            "LC_ALL": "C", "LANG": "C", "TZ": "UTC",
        }

    def call(self, args: List[str], what: str, cwd: Optional[str] = None) -> str:
        rc, out, err = self.run([self.git, *GIT_ISOLATION, *args], cwd or self.dest, self.env)
        if rc != 0:
            raise UpstreamError(f"{what}: git {' '.join(args[:3])} failed (rc={rc}): {(err or out).strip()[-800:]}")
        return out.strip()

    def probe(self, args: List[str]) -> Optional[str]:
        rc, out, _ = self.run([self.git, *GIT_ISOLATION, *args], self.dest, self.env)
        return out.strip() if rc == 0 else None

    def git_dir(self) -> Optional[str]:
        if not os.path.isdir(self.dest):
            return None
        found = self.probe(["rev-parse", "--absolute-git-dir"])
        top = self.probe(["rev-parse", "--show-toplevel"])
        if not found or not top or os.path.realpath(top) != os.path.realpath(self.dest):
            return None
        return found

    def read_stamp(self) -> Optional[Dict[str, Any]]:
        git_dir = self.git_dir()
        path = os.path.join(git_dir, STAMP_NAME) if git_dir else None
        if not path or not os.path.isfile(path):
            return None
        try:
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def write_stamp(self, record: Mapping[str, str]) -> None:
        git_dir = self.git_dir()
        if not git_dir:
            raise UpstreamError(f"{self.dest}: not a git work directory after preparation")
        atomic_write_text(os.path.join(git_dir, STAMP_NAME), json.dumps(dict(record), indent=2, sort_keys=True) + "\n")

    def remove_stamp(self) -> None:
        git_dir = self.git_dir()
        if git_dir and os.path.exists(os.path.join(git_dir, STAMP_NAME)):
            os.unlink(os.path.join(git_dir, STAMP_NAME))

    def head_and_tree(self) -> Tuple[Optional[str], Optional[str]]:
        head = self.probe(["rev-parse", "--verify", "HEAD^{commit}"])
        return head, self.probe(["rev-parse", "--verify", "HEAD^{tree}"])

    def is_clean(self) -> bool:
        status = self.probe(["status", "--porcelain", "--untracked-files=all", "--ignored"])
        return status == ""

    def init(self) -> None:
        os.makedirs(self.dest, exist_ok=True)
        self.call(["init", "--quiet", self.dest], f"{self.dest}: git init", cwd=self.dest)

    def has_commit(self, commit: str) -> bool:
        return self.probe(["cat-file", "-e", f"{commit}^{{commit}}"]) is not None

    def fetch(self, name: str, repository: str, commit: str, depth: int) -> None:
        shallow = [f"--depth={depth}"] if depth > 0 else []
        argv = [self.git, *GIT_ISOLATION, "fetch", "--quiet", "--no-tags", *shallow, repository, commit]
        rc, _, err = self.run(argv, self.dest, self.env)
        if rc == 0 and self.has_commit(commit):
            return
        # Servers that refuse a want by object id still serve their branches; the pin must be on one of them.
        self.call(["fetch", "--quiet", "--no-tags", repository, "+refs/heads/*:refs/remotes/upstream/*"],
                  f"upstream {name}: fetch {repository}")
        if not self.has_commit(commit):
            raise UpstreamError(f"upstream {name}: commit {commit} is not in {repository} "
                                f"(fetch by id: {err.strip()[-300:] or 'refused'}; not on any branch either)")

    def abort_am(self) -> None:
        git_dir = self.git_dir()
        if git_dir and os.path.isdir(os.path.join(git_dir, "rebase-apply")):
            self.probe(["am", "--abort"])

    def detach_clean(self, name: str, commit: str) -> None:
        self.abort_am()
        self.call(["checkout", "--quiet", "--force", "--detach", commit], f"upstream {name}: check out {commit}")
        self.call(["clean", "-ffdxq"], f"upstream {name}: clean the work tree")

    def apply(self, name: str, patch: str) -> None:
        rc, out, err = self.run([self.git, *GIT_ISOLATION, "am", "--quiet", "--committer-date-is-author-date",
                                 "--no-3way", "--", patch], self.dest, self.env)
        if rc != 0:
            self.abort_am()
            raise UpstreamError(f"upstream {name}: patch {os.path.basename(patch)} does not apply ({patch}): "
                                f"{(err or out).strip()[-800:]}")


# --- The whole preparation ---------------------------------------------------------------------

def current_state(io: GitIO, entry: LockEntry, patchset: str) -> Tuple[bool, Optional[str], Optional[str]]:
    """(already prepared, head, tree) — prepared means stamp, live HEAD/tree and a clean tree all agree."""
    stamp = io.read_stamp()
    if not stamp_matches(stamp, entry, patchset):
        return False, None, None
    head, tree = io.head_and_tree()
    ok = bool(stamp) and head == stamp.get("head") and tree == stamp.get("tree") and io.is_clean()
    return ok, head, tree


def verify_patchset(entry: LockEntry) -> str:
    check_patch_files(entry)
    actual = patchset_sha256(entry.patches)
    if entry.patchset_sha256 and actual != entry.patchset_sha256:
        raise UpstreamError(f"upstream {entry.name}: patch-set sha256 {actual} differs from the lock's "
                            f"{entry.patchset_sha256} ({len(entry.patches)} patch(es)); the series or a patch changed")
    return actual


def prepare(io: GitIO, entry: LockEntry, depth: int, check_mode: bool) -> Outcome:
    """Make io.dest hold entry's commit plus its patches; idempotent; changes nothing in check mode."""
    patchset = verify_patchset(entry)
    done, head, tree = current_state(io, entry, patchset)
    outcome = Outcome(entry.name, io.dest, entry.commit, patchset, tree, head, changed=not done)
    if done:
        return outcome
    outcome.actions = _planned_actions(io, entry)
    if check_mode:
        outcome.tree, outcome.head = entry.tree, entry.head
        return outcome
    _build(io, entry, depth)
    head, tree = io.head_and_tree()
    if not head or not tree:
        raise UpstreamError(f"upstream {entry.name}: no HEAD after applying the series in {io.dest}")
    outcome.head, outcome.tree = head, tree
    problem = mismatch_message(entry, tree, head)
    if problem:
        raise UpstreamError(problem)
    if not entry.tree:
        outcome.warnings.append(f"upstream {entry.name}: the lock has no tree; record tree: {tree}")
    io.write_stamp(stamp_record(entry, patchset, head, tree))
    return outcome


def _planned_actions(io: GitIO, entry: LockEntry) -> List[str]:
    actions = [] if io.git_dir() else [f"git init {io.dest}"]
    actions.append(f"fetch {entry.commit} from {entry.repository}")
    actions.append(f"detach at {entry.commit}")
    actions.extend(f"git am {os.path.basename(p)}" for p in entry.patches)
    return actions


def _build(io: GitIO, entry: LockEntry, depth: int) -> None:
    if io.git_dir() is None:
        if os.path.exists(io.dest) and os.listdir(io.dest):
            raise UpstreamError(f"upstream {entry.name}: {io.dest} exists, is not empty and is not a git work "
                                "directory of its own; refusing to touch it")
        io.init()
    io.remove_stamp()
    if not io.has_commit(entry.commit):
        io.fetch(entry.name, entry.repository, entry.commit, depth)
    io.detach_clean(entry.name, entry.commit)
    for patch in entry.patches:
        io.apply(entry.name, patch)
