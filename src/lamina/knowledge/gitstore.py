"""The git side of the knowledge repository: one bare repository per tenant, written and read
with dulwich (no git binary). Writes are serialised by a lock file and land with a
compare-and-swap of the branch, so two writers, in threads or processes, lose no commit.

dulwich and filelock are imported by the methods that use them, not with this module: a
process that never touches the knowledge repository (a CLI search, the MCP server's start)
does not pay for them."""

from __future__ import annotations

import contextlib
import hashlib
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast

from lamina.errors import ErrorCode, LaminaError

if TYPE_CHECKING:
    from dulwich.objects import ObjectID
    from dulwich.refs import Ref
    from dulwich.repo import Repo
    from filelock import BaseFileLock

BRANCH = cast("Ref", b"refs/heads/main")
_SAFE_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_FILE_MODE = 0o100644


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    author: str
    message: str
    timestamp: datetime
    blob: str | None  # the file's blob at this commit (None: deleted here)


def _repo_error(message: str, **details: object) -> LaminaError:
    return LaminaError(ErrorCode.REPOSITORY_ERROR, message, details=dict(details))


def _identity(author: str) -> bytes:
    if "<" in author and author.rstrip().endswith(">"):
        return author.encode()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", author).strip("-") or "unknown"
    return f"{author} <{slug}@lamina.local>".encode()


class GitStore:
    """Bare repositories under ``root``, one per tenant, on branch ``main``."""

    def __init__(self, root: Path, *, lock_timeout: float = 30.0) -> None:
        self.root = root
        self.lock_timeout = lock_timeout
        self._repos: dict[str, Repo] = {}
        self._guard = threading.Lock()

    def directory(self, tenant: str) -> Path:
        if _SAFE_TENANT.match(tenant) and ".." not in tenant:
            name = tenant
        else:
            name = "t-" + hashlib.sha256(tenant.encode()).hexdigest()[:32]
        return self.root / f"{name}.git"

    def exists(self, tenant: str) -> bool:
        return (self.directory(tenant) / "HEAD").is_file()

    def repo(self, tenant: str, *, create: bool = False) -> Repo | None:
        with self._guard:
            cached = self._repos.get(tenant)
            if cached is not None:
                return cached
            path = self.directory(tenant)
            if not (path / "HEAD").is_file():
                if not create:
                    return None
                from dulwich.repo import Repo

                path.mkdir(parents=True, exist_ok=True)
                repo = Repo.init_bare(str(path), default_branch=b"main")
            else:
                from dulwich.errors import NotGitRepository
                from dulwich.repo import Repo

                try:
                    repo = Repo(str(path))
                except (NotGitRepository, OSError, ValueError) as exc:
                    raise _repo_error(
                        f"the knowledge repository {path} is not a readable git repository: {exc}",
                        path=str(path),
                    ) from None
            self._repos[tenant] = repo
            return repo

    def forget(self, tenant: str) -> None:
        with self._guard:
            repo = self._repos.pop(tenant, None)
        if repo is not None:
            repo.close()

    def close(self) -> None:
        with self._guard:
            repos, self._repos = list(self._repos.values()), {}
        for repo in repos:
            repo.close()

    # -- reads ------------------------------------------------------------------------------

    def head(self, tenant: str) -> str | None:
        repo = self.repo(tenant)
        if repo is None:
            return None
        try:
            sha = repo.refs[BRANCH]
        except KeyError:
            return None
        return sha.decode()

    def _tree(self, repo: Repo, commit: str) -> ObjectID:
        from dulwich.objects import Commit, ObjectID

        try:
            obj = repo.object_store[ObjectID(commit.encode())]
        except KeyError:
            raise _repo_error(f"commit {commit} is not in the knowledge repository") from None
        if not isinstance(obj, Commit):
            raise _repo_error(f"{commit} is not a commit")
        tree: ObjectID = obj.tree
        return tree

    def _must(self, tenant: str) -> Repo:
        repo = self.repo(tenant)
        if repo is None:
            raise _repo_error(f"tenant {tenant!r} has no knowledge repository yet")
        return repo

    def read(self, tenant: str, path: str, commit: str) -> bytes | None:
        from dulwich.object_store import tree_lookup_path
        from dulwich.objects import Blob

        repo = self._must(tenant)
        try:
            _, sha = tree_lookup_path(
                repo.object_store.__getitem__, self._tree(repo, commit), path.encode()
            )
        except KeyError:
            return None
        blob = repo.object_store[sha]
        return blob.as_raw_string() if isinstance(blob, Blob) else None

    def blob(self, tenant: str, sha: str) -> bytes:
        from dulwich.objects import Blob, ObjectID

        obj = self._must(tenant).object_store[ObjectID(sha.encode())]
        if not isinstance(obj, Blob):
            raise _repo_error(f"{sha} is not a file")
        return obj.as_raw_string()

    def files(self, tenant: str, commit: str) -> dict[str, str]:
        """Every file at ``commit``: path → blob id."""
        repo = self._must(tenant)
        return {
            entry.path.decode(): entry.sha.decode()
            for entry in repo.object_store.iter_tree_contents(self._tree(repo, commit))
            if entry.path is not None and entry.sha is not None
        }

    def changes(self, tenant: str, old: str, new: str) -> dict[str, str | None]:
        """Files changed from ``old`` to ``new``: path → new blob id (None: deleted)."""
        from dulwich.diff_tree import tree_changes

        repo = self._must(tenant)
        out: dict[str, str | None] = {}
        for change in tree_changes(repo.object_store, self._tree(repo, old), self._tree(repo, new)):
            if change.old is not None and change.old.path is not None:
                out.setdefault(change.old.path.decode(), None)
            if change.new is not None and change.new.path is not None and change.new.sha:
                out[change.new.path.decode()] = change.new.sha.decode()
        return out

    def log(self, tenant: str, path: str, *, limit: int) -> list[CommitInfo]:
        """Commits that changed ``path``, newest first."""
        from dulwich.object_store import tree_lookup_path
        from dulwich.objects import ObjectID
        from dulwich.walk import Walker

        repo = self._must(tenant)
        head = self.head(tenant)
        if head is None:
            return []
        walker = Walker(
            repo.object_store, [ObjectID(head.encode())], paths=[path.encode()], max_entries=limit
        )
        out = []
        for entry in walker:
            commit = entry.commit
            try:
                _, sha = tree_lookup_path(repo.object_store.__getitem__, commit.tree, path.encode())
                blob: str | None = sha.decode()
            except KeyError:
                blob = None
            out.append(
                CommitInfo(
                    sha=commit.id.decode(),
                    author=commit.author.decode(errors="replace"),
                    message=commit.message.decode(errors="replace").strip(),
                    timestamp=datetime.fromtimestamp(commit.commit_time, UTC),
                    blob=blob,
                )
            )
        return out

    # -- writes -----------------------------------------------------------------------------

    def acquire(self, tenant: str) -> BaseFileLock:
        """Take the tenant's write lock (threads and processes alike); blocks up to
        ``lock_timeout``. Give the returned handle to ``release``.

        Every call builds its own lock object, so it holds its own OS handle on the lock file
        (``flock`` on POSIX, ``msvcrt.locking`` on Windows): two threads of one process exclude
        each other exactly as two processes do, and the lock is not re-entrant. The object is
        not thread-local, so the thread that releases it need not be the one that took it
        (the async service acquires and releases on worker threads)."""
        from filelock import FileLock, Timeout

        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(
            self.directory(tenant).with_suffix(".lock"),
            thread_local=False,
            is_singleton=False,
        )
        try:
            lock.acquire(timeout=self.lock_timeout, poll_interval=0.005)
        except Timeout:
            raise LaminaError(
                ErrorCode.CONFLICT,
                f"the knowledge repository of tenant {tenant!r} stayed locked "
                f"for {self.lock_timeout:g} s",
                retryable=True,
            ) from None
        return lock

    @staticmethod
    def release(handle: BaseFileLock) -> None:
        handle.release()

    @contextlib.contextmanager
    def locked(self, tenant: str) -> Iterator[None]:
        handle = self.acquire(tenant)
        try:
            yield
        finally:
            self.release(handle)

    def commit(
        self,
        tenant: str,
        parent: str | None,
        files: dict[str, bytes | None],
        *,
        message: str,
        author: str,
    ) -> str:
        """Commit ``files`` (None deletes) on top of ``parent``, which must still be the head.
        Call under ``locked``; the branch moves only if nobody moved it meanwhile."""
        from dulwich.object_store import commit_tree_changes
        from dulwich.objects import Blob, Commit, ObjectID, Tree

        repo = self.repo(tenant, create=True)
        assert repo is not None
        store = repo.object_store
        changes: list[tuple[bytes, int | None, ObjectID | None]] = []
        for path, data in sorted(files.items()):
            if data is None:
                changes.append((path.encode(), None, None))
            else:
                blob = Blob.from_string(data)
                store.add_object(blob)
                changes.append((path.encode(), _FILE_MODE, blob.id))
        if parent is None:
            empty = Tree()
            store.add_object(empty)
            base: ObjectID = empty.id
        else:
            base = self._tree(repo, parent)
        commit = Commit()
        commit.tree = commit_tree_changes(store, base, changes)
        commit.parents = [] if parent is None else [ObjectID(parent.encode())]
        commit.author = commit.committer = _identity(author)
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = message.encode() if message.endswith("\n") else (message + "\n").encode()
        store.add_object(commit)
        old = None if parent is None else ObjectID(parent.encode())
        if not repo.refs.set_if_equals(BRANCH, old, commit.id):
            raise LaminaError(
                ErrorCode.CONFLICT,
                "the knowledge repository moved while this change was written; try again",
                retryable=True,
            )
        return commit.id.decode()

    # -- health -----------------------------------------------------------------------------

    def check(self, tenant: str) -> dict[str, object]:
        """Whether the tenant's repository is readable: its head commit and every tree."""
        path = self.directory(tenant)
        if not path.exists():
            return {"status": "missing", "path": str(path)}
        from dulwich.repo import Repo

        try:
            repo = Repo(str(path))
        except Exception as exc:
            return {"status": "corrupt", "path": str(path), "error": str(exc)[:300]}
        try:
            try:
                head = repo.refs[BRANCH].decode()
            except KeyError:
                return {"status": "empty", "path": str(path)}
            for _ in repo.object_store.iter_tree_contents(self._tree(repo, head)):
                pass
        except Exception as exc:
            return {"status": "corrupt", "path": str(path), "error": str(exc)[:300]}
        finally:
            repo.close()
        return {"status": "ok", "path": str(path), "head": head}
