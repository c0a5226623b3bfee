"""An asv repository plugin for a copy of the tree without ``.git``: the commit is read from a manifest file.

A lent GPU machine receives the working tree but not its git history, and asv asks the repository for the
commit it records results under (``--set-commit-hash``) and for that commit's date. ``unfold-bench gpu-check
prepare`` writes the manifest here (``{"commit": ..., "date": <ms since the epoch>, "branch": ...}``) and an
asv configuration with ``"dvcs": "carried"``, ``"repo": <the manifest>`` and this module among its
``plugins``, so the results saved there are keyed exactly as a run of the same commit here would be.
Every operation that needs history (ranges, tags, other commits) raises asv's ``UserError``.
"""

from __future__ import annotations

import json
from pathlib import Path

from asv import util
from asv.repo import Repo


class CarriedRepository(Repo):
    """One commit, known by its manifest; the project is the tree asv runs in (``--python=same``)."""

    dvcs = "carried"
    _default_branch = "HEAD"

    def __init__(self, url: str, mirror_path: str) -> None:
        path = Path(url)
        try:
            manifest = json.loads(path.read_text())
            self.commit, self.date, self.branch = manifest["commit"], int(manifest["date"]), manifest["branch"]
        except (OSError, ValueError, KeyError) as error:
            raise util.UserError(f"repo={url!r}: not a readable commit manifest ({error})") from None
        self.path = str(path)

    @classmethod
    def url_match(cls, url: str) -> bool:
        return False  # chosen only by "dvcs": "carried"

    def _only(self, name: str) -> str:
        if name in ("HEAD", self.branch) or (len(name) >= 7 and self.commit.startswith(name)):
            return self.commit
        raise util.UserError(f"{name!r}: this tree carries commit {self.commit[:8]} only, with no history")

    def pull(self) -> None:
        pass

    def checkout(self, path: str, commit_hash: str) -> None:
        self._only(commit_hash)  # the tree asv runs in is the commit: nothing to check out

    def get_date(self, hash: str) -> int:
        self._only(hash)
        return self.date

    def get_hash_from_name(self, name: str | None) -> str:
        return self._only(name or "HEAD")

    def get_name_from_hash(self, commit: str) -> str | None:
        return self.branch if commit == self.commit else None

    def get_date_from_name(self, name: str) -> int:
        return self.get_date(self._only(name))

    def get_branch_commits(self, branch: str | None) -> list[str]:
        self._only(branch or "HEAD")
        return [self.commit]

    def get_tags(self) -> dict[str, str]:
        return {}

    def get_hashes_from_range(self, range_spec: str) -> list[str]:
        raise util.UserError(f"range {range_spec!r}: this tree carries commit {self.commit[:8]} only, with no history")

    def get_hash_from_parent(self, name: str) -> str:
        raise util.UserError(f"the parent of {name!r}: this tree carries commit {self.commit[:8]} only")

    def get_range_spec(self, commit_a: str, commit_b: str) -> str:
        raise util.UserError("commit ranges need the git history, which this tree does not carry")

    def get_new_range_spec(self, latest_result: str, branch: str | None = None) -> str:
        raise util.UserError("commit ranges need the git history, which this tree does not carry")
