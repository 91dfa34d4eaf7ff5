"""``[runtime.remote]``: which roles run on a Ray cluster, and what each run asks of a node."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

ResourceAmount = Annotated[float, Field(gt=0, le=1_000_000, allow_inf_nan=False)]


class RemoteRoles(BaseModel):
    """``[runtime.remote.roles]``: ``implementor = true`` runs implementors on the cluster."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    planner: bool = False
    implementor: bool = False
    reviewer: bool = False


class RemoteSettings(BaseModel):
    """``[runtime.remote]``: a run of a remote role is a Ray actor on a node that has what it
    asks (``resources``, ``num_cpus``, ``memory``), running that role's runtime there."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["ray"] = "ray"
    address: str = Field(
        default="auto",
        description="auto (the cluster this machine belongs to), HOST:PORT (its GCS) or ray://",
    )
    namespace: str = Field(
        default="", description="the Ray namespace of this engine's runs; empty: one per state dir"
    )
    resources: dict[str, ResourceAmount] = Field(
        default_factory=dict, description="custom resources a run takes, e.g. {agent_slot = 1}"
    )
    num_cpus: float = Field(default=0, ge=0, le=1024)
    memory: int = Field(default=0, ge=0, description="bytes a run reserves on its node; 0: none")
    node_dir: str = Field(
        default="", description="where runs work on a node; empty: <tmp>/cpe-node-<uid>"
    )
    clone_url: str = Field(
        default="",
        description="a URL every node can fetch the repository from (the head's default branch "
        "pushed there); empty: each run ships the repository as a git bundle",
    )
    roles: RemoteRoles = RemoteRoles()
