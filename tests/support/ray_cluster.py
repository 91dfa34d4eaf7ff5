"""The local Ray cluster the remote runtime's tests start (adapters/runtime/remote/cluster.py)."""

from adapters.runtime.remote.cluster import Node, RayCluster, ray_cluster

__all__ = ["Node", "RayCluster", "ray_cluster"]
