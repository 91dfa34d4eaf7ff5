"""CI on the fake GitLab: commit statuses (``POST /statuses/:sha``) and pipelines.

As on GitLab: a status needs ``state`` (``pending``, ``running``, ``success``, ``failed``,
``canceled``, ``skipped``) and the Developer role; it lands in the sha's external pipeline for
its ``ref`` (made on first use) as the job ``name`` (``default`` when none is given); a job
cannot move to the state it is in (``400 Cannot transition status via :run from :running
...``). ``GET /pipelines`` filters by ``sha``, ``ref``, ``status`` and ``source``, newest
first; an external pipeline's jobs are commit statuses, not CI jobs, so
``GET /pipelines/:id/jobs`` lists only the jobs of a pipeline the fake ran itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.fakes.gitlab import forge_payloads as fp
from tests.fakes.gitlab.records import DEVELOPER, PipelineRecord
from tests.fakes.gitlab.routes_issues import invalid
from tests.fakes.gitlab.server import Call, forbidden, missing, not_found
from tests.fakes.http import Reply

if TYPE_CHECKING:
    from tests.fakes.gitlab.fake import FakeGitLab

STATES = ("pending", "running", "success", "failed", "canceled", "skipped")


def register(gl: FakeGitLab) -> None:
    def post_status(call: Call) -> Reply:
        state = call.text("state")
        if state is None:
            raise missing("state")
        if state not in STATES:
            raise invalid("state")
        sha = gl.git.resolve(call.params["sha"])
        if sha is None:
            raise not_found("Commit")
        if gl.people.level(call.user) < DEVELOPER:
            raise forbidden()
        name = call.text("name") or call.text("context") or "default"
        job = gl.status_job(
            sha,
            name,
            state,
            str(call.user),
            ref=call.text("ref"),
            target_url=call.text("target_url"),
            description=call.text("description"),
        )
        pipe = next(p for p in gl.pipelines if p.id == job.pipeline)
        return Reply(201, fp.commit_status(gl.site, job, sha, pipe.ref, gl.user(job.author)))

    def list_pipelines(call: Call) -> Reply:
        found = list(gl.pipelines)
        for name in ("sha", "ref", "source", "status"):
            if call.text(name):
                found = [p for p in found if getattr(p, name) == call.text(name)]
        newest_first = (call.text("sort") or "desc") == "desc"
        found.sort(key=lambda p: p.id, reverse=newest_first)
        return Reply(body=[fp.pipeline_basic(gl.site, p) for p in found], paginate="")

    def pipeline(call: Call) -> PipelineRecord:
        pipe = next((p for p in gl.pipelines if p.id == int(call.params["pid"])), None)
        if pipe is None:
            raise not_found()
        return pipe

    def get_pipeline(call: Call) -> Reply:
        pipe = pipeline(call)
        return Reply(body=fp.pipeline(gl.site, pipe, gl.user(pipe.user)))

    def jobs(call: Call) -> Reply:
        pipe = pipeline(call)
        found = [
            fp.job(gl.site, j, pipe, gl.user(j.author))
            for j in pipe.jobs
            if j.kind == "build" and not j.retried
        ]
        return Reply(body=found, paginate="")

    route = gl.route
    route("POST", r"/statuses/(?P<sha>[^/]+)", post_status, "statuses/create")
    route("GET", "/pipelines", list_pipelines, "pipelines/list")
    route("GET", r"/pipelines/(?P<pid>\d+)", get_pipeline, "pipelines/get")
    route("GET", r"/pipelines/(?P<pid>\d+)/jobs", jobs, "jobs/list-pipeline")
