"""Repository endpoints of the fake GitLab, answered from its bare repository: branches, commits,
compare, merge base, tree, files and blobs, and the Commits API's ``POST /repository/commits``
with its actions (``create``, ``update``, ``delete``, ``move``, ``chmod``; text or base64;
``execute_filemode`` is read by ``chmod`` only, as documented).

The Commits API's refusals are GitLab's ``400 {"message": ...}``: a create of a file that
exists (``A file with this name already exists``), an update, delete or move of one that does
not (``A file with this name doesn't exist``), a ``last_commit_id`` the file moved on from
(``The file has changed since you started editing it: <path>``), a start from a branch that
does not exist (``You can only create or edit files when you are on a branch``), a
``start_branch`` or ``start_sha`` for a branch that already exists without ``force`` (``A
branch called '<branch>' already exists. Switch to that branch in order to make changes``),
and a ``start_sha`` the repository lacks (``Cannot find start_sha '<sha>'``)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import TYPE_CHECKING, Any

from tests.fakes.gitdata import GitError
from tests.fakes.gitlab import forge_payloads as fp
from tests.fakes.gitlab.server import Call, bad_request, forbidden, missing, not_found
from tests.fakes.http import HttpError, Reply

if TYPE_CHECKING:
    from tests.fakes.gitlab.fake import FakeGitLab

SHA = r"(?P<sha>[^/]+)"
BRANCH = r"(?P<branch>[^/]+)"
ACTIONS = ("create", "update", "delete", "move", "chmod")


def register(gl: FakeGitLab) -> None:
    def info(ref: str, what: str = "Commit") -> Any:
        sha = gl.git.resolve(ref)
        if sha is None:
            raise not_found(what)
        return gl.git.commit_info(sha)

    def commit_detail(sha: str) -> dict[str, Any]:
        found = gl.git.commit_info(sha)
        parent = found.parents[0] if found.parents else None
        changes = gl.git.changed_files(parent, sha) if parent else []
        stats = (sum(c.additions for c in changes), sum(c.deletions for c in changes))
        pipes = [p for p in gl.pipelines if p.sha == sha]
        last = fp.pipeline_basic(gl.site, pipes[-1]) if pipes else None
        return fp.commit_detail(gl.site, found, stats, last, pipes[-1].status if pipes else None)

    def branch_payload(name: str) -> dict[str, Any]:
        head = gl.head_of(name)
        if head is None:
            raise not_found("Branch")
        default = name == gl.default_branch
        merged = not default and gl.git.is_ancestor(head, gl.default_head())
        return fp.branch(gl.site, name, gl.git.commit_info(head), default=default, merged=merged)

    def list_branches(call: Call) -> Reply:
        names = gl.git.line("for-each-ref", "--format=%(refname:short)", "refs/heads").split()
        search = call.text("search") or ""
        return Reply(body=[branch_payload(n) for n in sorted(names) if search in n], paginate="")

    def get_branch(call: Call) -> Reply:
        return Reply(body=branch_payload(call.params["branch"]))

    def create_branch(call: Call) -> Reply:
        name, ref = str(call.need("branch")), str(call.need("ref"))
        if not gl.may_push(call.user):
            raise forbidden()
        if gl.head_of(name) is not None:
            raise bad_request("Branch already exists")
        sha = gl.git.resolve(ref)
        if sha is None:
            raise bad_request("Invalid reference name: " + ref)
        gl.git.set_ref(f"refs/heads/{name}", sha)
        gl.branch_moved(name)
        return Reply(201, branch_payload(name))

    def delete_branch(call: Call) -> Reply:
        name = call.params["branch"]
        if gl.head_of(name) is None:
            raise not_found("Branch")
        if not gl.may_push(call.user):
            raise forbidden()
        if name == gl.default_branch:
            raise HttpError(405, "405 Method Not Allowed")
        gl.git.git("update-ref", "-d", f"refs/heads/{name}")
        return Reply(204)

    def get_commit(call: Call) -> Reply:
        return Reply(body=commit_detail(info(call.params["sha"]).sha))

    def compare(call: Call) -> Reply:
        start, end = info(str(call.need("from"))), info(str(call.need("to")))
        straight = call.flag("straight") or False
        base = start.sha if straight else (gl.git.merge_base(start.sha, end.sha) or start.sha)
        shas = gl.git.line("rev-list", "--reverse", f"{base}..{end.sha}").split()
        return Reply(
            body={
                "commit": fp.commit(gl.site, end) if shas else None,
                "commits": [fp.commit(gl.site, gl.git.commit_info(s)) for s in shas],
                "diffs": [fp.diff(c) for c in gl.git.changed_files(base, end.sha)],
                "compare_timeout": False,
                "compare_same_ref": start.sha == end.sha,
                "web_url": f"{gl.site.web}/-/compare/{start.sha}...{end.sha}",
            }
        )

    def merge_base(call: Call) -> Reply:
        refs = call.arg("refs") or []
        if not isinstance(refs, list) or len(refs) < 2:
            raise bad_request("Provide at least 2 refs")
        shas = []
        for ref in refs:
            sha = gl.git.resolve(str(ref))
            if sha is None:
                raise not_found(f"Unknown ref: {ref}")
            shas.append(sha)
        found = gl.git.line("merge-base", *shas) if shas else ""
        if not found:
            raise not_found("Merge Base")
        return Reply(body=fp.commit(gl.site, gl.git.commit_info(found)))

    def tree(call: Call) -> Reply:
        ref = call.text("ref") or gl.default_branch
        sha = gl.git.resolve(ref)
        path = (call.text("path") or "").strip("/")
        if sha is None:
            raise not_found("Tree")
        target = f"{sha}:{path}" if path else sha
        if gl.git.object_type(target) != "tree" and not (
            not path and gl.git.object_type(sha) == "commit"
        ):
            raise not_found("Tree")
        recursive = call.flag("recursive") or False
        entries = gl.git.ls_tree(target, recursive=recursive)
        prefix = f"{path}/" if path else ""
        found = [
            fp.tree_entry(e.sha, e.path.rpartition("/")[2], e.type, prefix + e.path, e.mode)
            for e in entries
        ]
        return Reply(body=found, paginate="")

    def blob_at(call: Call) -> tuple[str, str]:
        ref = call.text("ref") or gl.default_branch
        sha = gl.git.resolve(ref)
        path = call.params["path"]
        if sha is None or gl.git.object_type(f"{sha}:{path}") != "blob":
            raise not_found("File")
        return sha, gl.git.line("rev-parse", f"{sha}:{path}")

    def raw_file(call: Call) -> Reply:
        _, blob = blob_at(call)
        return Reply(body=gl.git.read_blob(blob))

    def get_file(call: Call) -> Reply:
        commit, blob = blob_at(call)
        path = call.params["path"]
        data = gl.git.read_blob(blob)
        last = gl.git.line("log", "-1", "--format=%H", commit, "--", path)
        mode = next(e.mode for e in gl.git.ls_tree(commit, recursive=True) if e.path == path)

        return Reply(
            body={
                "file_name": path.rpartition("/")[2],
                "file_path": path,
                "size": len(data),
                "encoding": "base64",
                "content": base64.b64encode(data).decode(),
                "content_sha256": hashlib.sha256(data).hexdigest(),
                "ref": call.text("ref") or gl.default_branch,
                "blob_id": blob,
                "commit_id": commit,
                "last_commit_id": last,
                "execute_filemode": mode == "100755",
            }
        )

    def raw_blob(call: Call) -> Reply:
        sha = call.params["sha"]
        if gl.git.object_type(sha) != "blob":
            raise not_found("Blob")
        return Reply(body=gl.git.read_blob(sha))

    def create_commit(call: Call) -> Reply:
        branch = str(call.need("branch"))
        message = str(call.need("commit_message"))
        actions = call.arg("actions")
        if not isinstance(actions, list) or not actions:
            raise missing("actions")
        if not gl.may_push(call.user):
            raise bad_request("You are not allowed to push into this branch")
        if branch == gl.default_branch and not gl.may_merge(call.user):
            raise bad_request("You are not allowed to push into this branch")
        parent = start_of(call, branch)
        entries = apply_actions(parent, actions)
        base_tree = gl.git.line("rev-parse", f"{parent}^{{tree}}")
        tree_sha = gl.git.build_tree(base_tree, entries)
        author = {
            "name": call.text("author_name") or str(call.user),
            "email": call.text("author_email") or f"{call.user}@example.invalid",
        }
        sha = gl.git.commit(
            tree_sha, [parent], message + ("" if message.endswith("\n") else "\n"), author
        )
        gl.git.set_ref(f"refs/heads/{branch}", sha)
        gl.branch_moved(branch)
        return Reply(201, commit_detail(sha))

    def start_of(call: Call, branch: str) -> str:
        start_branch, start_sha = call.text("start_branch"), call.text("start_sha")
        force = call.flag("force") or False
        if start_branch and start_sha:
            raise bad_request("You can't pass both start_branch and start_sha")
        existing = gl.head_of(branch)
        different = start_sha is not None or (start_branch or branch) != branch
        if existing is not None and different and not force:
            raise bad_request(
                f"A branch called '{branch}' already exists. Switch to that "
                "branch in order to make changes"
            )
        if start_sha:
            if gl.git.object_type(start_sha) != "commit":
                raise bad_request(f"Cannot find start_sha '{start_sha}'")
            return gl.git.line("rev-parse", start_sha)
        head = gl.head_of(start_branch or branch)
        if head is None:
            raise bad_request("You can only create or edit files when you are on a branch")
        return head

    def apply_actions(parent: str, actions: list[Any]) -> list[dict[str, object]]:
        """The tree entries ``actions`` make of ``parent``'s tree, refused as GitLab refuses."""
        tree = gl.git.ls_tree(parent, recursive=True)
        present = {e.path: (e.mode, e.sha) for e in tree if e.type == "blob"}
        entries: list[dict[str, object]] = []
        for index, action in enumerate(actions):
            kind, path = str(action.get("action")), str(action.get("file_path") or "")
            if kind not in ACTIONS:
                text = f"actions[{index}][action] does not have a valid value"
                raise HttpError(400, text, body={"error": text})
            if not path:
                raise missing(f"actions[{index}][file_path]")
            old = str(action.get("previous_path") or path) if kind == "move" else path
            last = action.get("last_commit_id")
            moved_on = last and gl.git.line("log", "-1", "--format=%H", parent, "--", old) != last
            if moved_on and kind in ("update", "move", "delete"):
                raise bad_request(f"The file has changed since you started editing it: {path}")
            if kind == "create" and path in present:
                raise bad_request("A file with this name already exists")
            if kind != "create" and old not in present:
                raise bad_request("A file with this name doesn't exist")
            if kind == "move" and path in present:
                raise bad_request("A file with this name already exists")
            mode, sha = present.pop(old, ("100644", ""))
            if kind == "delete":
                entries.append({"path": path, "sha": None})
                continue
            if kind == "chmod" and action.get("execute_filemode") is not None:
                mode = "100755" if action.get("execute_filemode") else "100644"
            has_content = kind in ("create", "update") or action.get("content") is not None
            entry = (
                blob_entry(path, action, mode)
                if has_content
                else {"path": path, "mode": mode, "sha": sha}
            )
            if kind == "move":
                entries.append({"path": old, "sha": None})
            entries.append(entry)
            present[path] = (str(entry["mode"]), str(entry["sha"]))
        return entries

    def blob_entry(path: str, action: dict[str, Any], mode: str) -> dict[str, object]:
        content = action.get("content") or ""
        if action.get("encoding") == "base64":
            try:
                data = base64.b64decode(str(content), validate=True)
            except (binascii.Error, ValueError):
                raise bad_request("Invalid base64 content") from None
        else:
            data = str(content).encode()
        try:
            return {"path": path, "mode": mode, "sha": gl.git.write_blob(data)}
        except GitError as failed:
            raise bad_request(str(failed)) from None

    def statuses(call: Call) -> Reply:
        sha = info(call.params["sha"]).sha
        ref, name, every = call.text("ref"), call.text("name"), call.flag("all") or False
        found = []
        for pipe in gl.pipelines:
            if pipe.sha != sha or (ref and pipe.ref != ref):
                continue
            for job in pipe.jobs:
                if job.kind != "external" or (name and job.name != name):
                    continue
                if job.retried and not every:
                    continue
                found.append(fp.commit_status(gl.site, job, sha, pipe.ref, gl.user(job.author)))
        return Reply(body=found, paginate="")

    route = gl.route
    route("GET", "/repository/branches", list_branches, "branches/list")
    route("GET", f"/repository/branches/{BRANCH}", get_branch, "branches/get")
    route("POST", "/repository/branches", create_branch, "branches/create")
    route("DELETE", f"/repository/branches/{BRANCH}", delete_branch, "branches/delete")
    route("GET", f"/repository/commits/{SHA}", get_commit, "commits/get")
    route("POST", "/repository/commits", create_commit, "commits/create")
    route("GET", f"/repository/commits/{SHA}/statuses", statuses, "statuses/list")
    route("GET", "/repository/compare", compare, "repositories/compare")
    route("GET", "/repository/merge_base", merge_base, "repositories/merge-base")
    route("GET", "/repository/tree", tree, "repositories/tree")
    route("GET", r"/repository/files/(?P<path>[^/]+)/raw", raw_file, "files/raw")
    route("GET", r"/repository/files/(?P<path>[^/]+)", get_file, "files/get")
    route("GET", f"/repository/blobs/{SHA}/raw", raw_blob, "repositories/blob-raw")
