"""Git Data endpoints of the fake GitHub (blobs, trees, commits, refs) on its bare repository."""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from tests.fakes.gitdata import GitError
from tests.fakes.github import detail_payloads
from tests.fakes.github.server import Call
from tests.fakes.http import Handler, HttpError, Reply, Router

if TYPE_CHECKING:
    from tests.fakes.github.fake import FakeGitHub

SHA = r"(?P<sha>[0-9a-f]{40})"


def register(router: Router, prefix: str, gh: FakeGitHub) -> None:
    git = gh.git

    def create_blob(call: Call) -> Reply:
        body = call.body or {}
        content = body.get("content")
        if not isinstance(content, str):
            raise HttpError(422, "Validation Failed", [{"field": "content", "code": "missing"}])
        if body.get("encoding", "utf-8") == "base64":
            try:
                data = base64.b64decode(content, validate=False)
            except binascii.Error as exc:
                raise HttpError(422, f"Invalid base64: {exc}") from exc
        else:
            data = content.encode()
        return Reply(201, detail_payloads.short_blob(gh.urls, git.write_blob(data)))

    def get_blob(call: Call) -> Reply:
        sha = call.params["sha"]
        if git.object_type(sha) != "blob":
            raise HttpError(404, "Not Found")
        return Reply(body=detail_payloads.blob(gh.urls, sha, git.read_blob(sha)))

    def create_tree(call: Call) -> Reply:
        body = call.body or {}
        entries = body.get("tree")
        if not isinstance(entries, list):
            raise HttpError(422, "Validation Failed", [{"field": "tree", "code": "missing"}])
        base = body.get("base_tree")
        if base and git.object_type(base) != "tree":
            raise HttpError(422, f"base_tree {base} is not a tree")
        try:
            sha = git.build_tree(base, entries)
        except GitError as exc:
            raise HttpError(422, f"Validation Failed: {exc}") from exc
        return Reply(201, detail_payloads.git_tree(gh.urls, sha, git.ls_tree(sha)))

    def get_tree(call: Call) -> Reply:
        sha = call.params["sha"]
        kind = git.object_type(sha)
        if kind not in ("tree", "commit"):
            raise HttpError(404, "Not Found")
        tree = git.line("rev-parse", f"{sha}^{{tree}}")
        recursive = call.query.get("recursive") not in (None, "", "0", "false")
        return Reply(body=detail_payloads.git_tree(gh.urls, tree, git.ls_tree(tree, recursive)))

    def create_commit(call: Call) -> Reply:
        body = call.body or {}
        tree, parents = body.get("tree"), body.get("parents") or []
        if not tree or git.object_type(str(tree)) != "tree":
            raise HttpError(422, "Validation Failed", [{"field": "tree", "code": "invalid"}])
        for parent in parents:
            if git.object_type(str(parent)) != "commit":
                raise HttpError(422, f"Parent SHA {parent} does not exist")
        sha = git.commit(str(tree), [str(p) for p in parents], str(body.get("message", "")),
                         body.get("author"))  # fmt: skip
        return Reply(201, detail_payloads.git_commit(gh.urls, git.commit_info(sha)))

    def get_commit(call: Call) -> Reply:
        sha = call.params["sha"]
        if git.object_type(sha) != "commit":
            raise HttpError(404, "Not Found")
        return Reply(body=detail_payloads.git_commit(gh.urls, git.commit_info(sha)))

    def get_ref(call: Call) -> Reply:
        ref = "refs/" + call.params["ref"]
        sha = git.resolve(ref) if ref.startswith("refs/heads/") else None
        if sha is None:
            raise HttpError(404, "Not Found")
        return Reply(body=detail_payloads.git_ref(gh.urls, ref, sha))

    def create_ref(call: Call) -> Reply:
        body = call.body or {}
        ref, sha = str(body.get("ref", "")), str(body.get("sha", ""))
        if not ref.startswith("refs/heads/") or ref.count("/") < 2:
            raise HttpError(422, "Reference name is invalid")
        if git.object_type(sha) != "commit":
            raise HttpError(422, "Object does not exist")
        if git.resolve(ref) is not None:
            raise HttpError(422, "Reference already exists")
        try:
            git.set_ref(ref, sha, "0" * 40)
        except GitError as exc:
            raise HttpError(422, f"Reference name is invalid: {exc}") from exc
        gh.ref_moved(ref.removeprefix("refs/heads/"), sha, None, call.login)
        return Reply(201, detail_payloads.git_ref(gh.urls, ref, sha))

    def update_ref(call: Call) -> Reply:
        ref = "refs/" + call.params["ref"]
        body = call.body or {}
        sha = str(body.get("sha", ""))
        old = git.resolve(ref)
        if old is None:
            raise HttpError(422, "Reference does not exist")
        if git.object_type(sha) != "commit":
            raise HttpError(422, "Object does not exist")
        if not body.get("force") and not git.is_ancestor(old, sha):
            raise HttpError(422, "Update is not a fast forward")
        git.set_ref(ref, sha, old)
        gh.ref_moved(ref.removeprefix("refs/heads/"), sha, old, call.login)
        return Reply(body=detail_payloads.git_ref(gh.urls, ref, sha))

    def pushing(handler: Handler) -> Handler:
        """Git data writes need write access to the repository's contents."""

        def guarded(call: Call) -> Reply:
            if call.access is not None and not call.access.can_push:
                raise HttpError(403, call.access.refusal)
            return handler(call)

        return guarded

    add = router.add
    add("POST", f"{prefix}/git/blobs", pushing(create_blob), "git/create-blob")
    add("GET", f"{prefix}/git/blobs/{SHA}", get_blob, "git/get-blob")
    add("POST", f"{prefix}/git/trees", pushing(create_tree), "git/create-tree")
    add("GET", f"{prefix}/git/trees/{SHA}", get_tree, "git/get-tree")
    add("POST", f"{prefix}/git/commits", pushing(create_commit), "git/create-commit")
    add("GET", f"{prefix}/git/commits/{SHA}", get_commit, "git/get-commit")
    add("GET", f"{prefix}/git/ref/(?P<ref>.+)", get_ref, "git/get-ref")
    add("POST", f"{prefix}/git/refs", pushing(create_ref), "git/create-ref")
    add("PATCH", f"{prefix}/git/refs/(?P<ref>.+)", pushing(update_ref), "git/update-ref")
