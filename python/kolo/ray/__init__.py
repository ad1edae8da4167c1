"""kolo.ray: Horovod's horovod.ray on kolo (README "On Ray", docs/ENGINES.md).

    from kolo.ray import RayExecutor, ElasticRayExecutor

RayExecutor runs a fixed job of Ray actors, each a kolo rank; ElasticRayExecutor (and
RayExecutor with min_workers) an elastic one, kolorun's elastic driver taking Ray's live nodes
as its hosts and starting each worker as an actor on its node.
"""

from kolo.ray.elastic import ElasticRayExecutor, RayHostDiscovery
from kolo.ray.runner import RayExecutor
from kolo.ray.worker import BaseHorovodWorker

__all__ = ["RayExecutor", "BaseHorovodWorker", "ElasticRayExecutor", "RayHostDiscovery"]
